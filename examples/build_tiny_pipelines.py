"""Build tiny, randomly initialised Stable Diffusion 3.5-medium and Qwen-Image pipelines.

Both pipelines use the real diffusers / transformers architecture classes with configs that
follow the published checkpoints, scaled down so that a whole pipeline is a few MB and a
128x128 image takes seconds on a CPU. Nothing is downloaded: every weight is seeded
(`torch.manual_seed(seed)` before each component) and every tokenizer is trained here, with
the `tokenizers` library, on text that ships with Python (`pydoc_data.topics`).

    sd3/         StableDiffusion3Pipeline (stabilityai/stable-diffusion-3.5-medium layout):
                 SD3Transformer2DModel with dual attention + qk RMSNorm, 16-channel AutoencoderKL,
                 two CLIPTextModelWithProjection + CLIPTokenizer, T5EncoderModel + T5 tokenizer,
                 FlowMatchEulerDiscreteScheduler(shift=3.0).
    qwen_image/  QwenImagePipeline (Qwen/Qwen-Image layout): QwenImageTransformer2DModel,
                 AutoencoderKLQwenImage, Qwen2_5_VLForConditionalGeneration + Qwen2Tokenizer,
                 FlowMatchEulerDiscreteScheduler with dynamic (exponential) shifting.

The saved folders load through the ordinary path, e.g.
`DiffusionPipeline.from_pretrained(path, dtype=torch.bfloat16)`.

Run:
    .venv/bin/python examples/build_tiny_pipelines.py --out /tmp/tiny_pipelines --which both
    .venv/bin/python examples/build_tiny_pipelines.py --which sd3 --check   # also generate on CPU
"""
import argparse
import json
import math
import os
import tempfile
import time
from collections import Counter

import torch
from diffusers import (
    AutoencoderKL,
    AutoencoderKLQwenImage,
    DiffusionPipeline,
    FlowMatchEulerDiscreteScheduler,
    QwenImagePipeline,
    QwenImageTransformer2DModel,
    SD3Transformer2DModel,
    StableDiffusion3Pipeline,
)
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    CLIPTextConfig,
    CLIPTextModelWithProjection,
    CLIPTokenizer,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2Tokenizer,
    T5Config,
    T5EncoderModel,
    T5TokenizerFast,
)

DEFAULT_OUT = os.path.join(tempfile.gettempdir(), "tiny_pipelines")
PROMPT = "a photo of a cat"

# QwenImagePipeline wraps every prompt in this template and drops the first
# `prompt_template_encode_start_idx` (34) hidden states, which the real Qwen tokenizer spends on the
# system part. The tokenizer trained below must spend exactly as many tokens on it.
QWEN_TEMPLATE_DROP = 34
QWEN_TEMPLATE_PREFIX = (
    "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, text, "
    "spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n"
)
QWEN_SPECIAL_TOKENS = [  # same order as in Qwen2.5's vocabulary (151643, 151644, ...), minus the unused ones
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]


# ----------------------------------------------------------------------------------------------
# Tokenizers, trained locally
# ----------------------------------------------------------------------------------------------

def _corpus():
    """English text available offline: Python's help topics, plus the Qwen template and a few
    captions, repeated so that BPE learns their words as whole tokens."""
    from pydoc_data.topics import topics

    captions = [
        QWEN_TEMPLATE_PREFIX + PROMPT + "<|im_end|>\n<|im_start|>assistant\n",
        "a photo of a cat sitting on a red sofa",
        "an astronaut riding a horse on the moon, digital art",
        "a dog in the snow, high quality photograph",
    ]
    return [topics[k] for k in sorted(topics)] + captions * 200


def _byte_alphabet():
    # Sorting by code point gives the byte order of GPT-2's bytes->unicode table, as in CLIP/Qwen.
    return sorted(pre_tokenizers.ByteLevel.alphabet())


def _train_bpe(reference, vocab_size, byte_level=True, end_of_word_suffix=None):
    """A BPE trained on `_corpus()` with the normalizer and pre-tokenizer that the transformers
    tokenizer `reference` installs, so that training and use split text alike. BPE training is
    deterministic (the tokenizers Unigram trainer is not: two runs give different vocabularies)."""
    backend = reference.backend_tokenizer
    options = {"end_of_word_suffix": end_of_word_suffix} if end_of_word_suffix else {}
    tok = Tokenizer(models.BPE(**options))
    if backend.normalizer is not None:
        tok.normalizer = backend.normalizer
    tok.pre_tokenizer = backend.pre_tokenizer
    if byte_level:  # every byte gets a token, so no text is ever unknown
        options["initial_alphabet"] = _byte_alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, **options)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return tok


def _merges(tok):
    return [tuple(pair) for pair in json.loads(tok.to_str())["model"]["merges"]]


def _vocab_from(tokens):
    vocab = {}
    for token in tokens:
        vocab.setdefault(token, len(vocab))
    return vocab


def _write_bpe_files(folder, vocab, merges):
    """vocab.json + merges.txt next to tokenizer.json, for loaders that want the classic files."""
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))


def build_clip_tokenizer(pad_token="<|endoftext|>", vocab_size=1000):
    """CLIPTokenizer with CLIP's vocabulary layout: 256 bytes, 256 bytes + '</w>', merges, then
    <|startoftext|> and <|endoftext|> last (so eos has the largest id, as CLIP's pooling assumes).
    vocab_size is the BPE training target; adding every byte + '</w>' gives 1183 tokens.
    Returns the tokenizer and its vocab and merges (for vocab.json / merges.txt)."""
    merges = _merges(_train_bpe(CLIPTokenizer(), vocab_size, end_of_word_suffix="</w>"))
    alphabet = _byte_alphabet()
    vocab = _vocab_from(
        alphabet + [c + "</w>" for c in alphabet] + ["".join(m) for m in merges]
        + ["<|startoftext|>", "<|endoftext|>"]
    )
    tokenizer = CLIPTokenizer(vocab=vocab, merges=merges, pad_token=pad_token, model_max_length=77)
    return tokenizer, vocab, merges


def build_t5_tokenizer(vocab_size=1000):
    """T5 tokenizer (a Unigram model, like T5's sentencepiece one) without sentencepiece. The pieces
    come from a BPE trained with T5's pre-tokenizer; each piece's Unigram score is its smoothed
    log-frequency when that BPE encodes the corpus. <pad>, </s>, <unk> get ids 0, 1, 2 as in T5."""
    specials = ["<pad>", "</s>", "<unk>"]
    bpe = _train_bpe(T5TokenizerFast(extra_ids=0), vocab_size - len(specials), byte_level=False)
    counts = Counter(token for encoding in bpe.encode_batch(_corpus()) for token in encoding.tokens)
    pieces = bpe.get_vocab()
    total = sum(counts.values()) + len(pieces)
    scored = sorted(((p, math.log((counts[p] + 1) / total)) for p in pieces), key=lambda ps: (-ps[1], ps[0]))
    vocab = [(token, 0.0) for token in specials] + scored
    # extra_ids=0: no <extra_id_*> sentinels, which only matter for span-corruption training.
    return T5TokenizerFast(vocab=vocab, extra_ids=0, model_max_length=512)


def build_qwen_tokenizer(vocab_size=2000):
    """Qwen2Tokenizer (byte-level BPE, Qwen2's pre-tokenizer regex) with the chat special tokens.
    vocab_size is big enough that the template prefix is 34 tokens, as with the real one.
    Returns the tokenizer and its vocab and merges (for vocab.json / merges.txt)."""
    merges = _merges(_train_bpe(Qwen2Tokenizer(), vocab_size - len(QWEN_SPECIAL_TOKENS)))
    vocab = _vocab_from(_byte_alphabet() + ["".join(m) for m in merges] + QWEN_SPECIAL_TOKENS)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        eos_token="<|im_end|>",  # as in Qwen2.5-VL-7B-Instruct's tokenizer_config
        pad_token="<|endoftext|>",
        extra_special_tokens=QWEN_SPECIAL_TOKENS[1:],
        model_max_length=131072,
    )
    prefix_len = len(tokenizer(QWEN_TEMPLATE_PREFIX).input_ids)
    if prefix_len != QWEN_TEMPLATE_DROP:
        raise RuntimeError(f"template prefix is {prefix_len} tokens; the pipeline drops {QWEN_TEMPLATE_DROP}")
    return tokenizer, vocab, merges


# ----------------------------------------------------------------------------------------------
# Stable Diffusion 3.5 medium
# ----------------------------------------------------------------------------------------------

def _clip_text_encoder(tokenizer, hidden_size, projection_dim, hidden_act, seed):
    """CLIPTextModelWithProjection: 2 layers, 4x MLP, 8-dim heads."""
    config = CLIPTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=hidden_size // 8,
        projection_dim=projection_dim,
        max_position_embeddings=77,
        hidden_act=hidden_act,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return CLIPTextModelWithProjection(config)


def build_sd3(path, seed=0):
    """Save a tiny StableDiffusion3Pipeline with the SD3.5-medium architecture at `path`."""
    clip_l_dim, clip_g_dim, t5_dim = 16, 32, 64

    # tokenizer/ + tokenizer_2/: CLIP BPE, 77 tokens; SD3's tokenizer_2 pads with "!".
    tokenizer, clip_vocab, clip_merges = build_clip_tokenizer()
    tokenizer_2 = CLIPTokenizer(vocab=clip_vocab, merges=clip_merges, pad_token="!", model_max_length=77)
    tokenizer_3 = build_t5_tokenizer()

    # text_encoder: openai/clip-vit-large-patch14 (hidden 768, 12 layers, proj 768, quick_gelu).
    text_encoder = _clip_text_encoder(tokenizer, clip_l_dim, clip_l_dim, "quick_gelu", seed)
    # text_encoder_2: OpenCLIP bigG (hidden 1280, 32 layers, proj 1280, gelu).
    text_encoder_2 = _clip_text_encoder(tokenizer_2, clip_g_dim, clip_g_dim, "gelu", seed)

    # text_encoder_3: google/t5-v1_1-xxl encoder (d_model 4096, d_ff 10240, 64 heads x 64, 24 layers,
    # gated-gelu). Its width is the transformer's joint_attention_dim; the CLIP hidden states
    # (16 + 32 concatenated) are zero-padded up to it by the pipeline.
    t5_config = T5Config(
        vocab_size=len(tokenizer_3),
        d_model=t5_dim,
        d_kv=16,
        d_ff=2 * t5_dim,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        tie_word_embeddings=False,
        pad_token_id=tokenizer_3.pad_token_id,
        eos_token_id=tokenizer_3.eos_token_id,
        decoder_start_token_id=tokenizer_3.pad_token_id,
    )
    torch.manual_seed(seed)
    text_encoder_3 = T5EncoderModel(t5_config)

    # transformer: stabilityai/stable-diffusion-3.5-medium (24 layers, 24 heads x 64, dual attention
    # in layers 0..12, qk_norm rms_norm, pos_embed_max_size 384, sample_size 128 = 1024 px / 8).
    # Here: 3 layers with dual attention in the first two, 4 heads x 16; sample_size 16 = 128 px / 8;
    # the 16x16 grid of 2x2 patches covers images up to 256x256.
    torch.manual_seed(seed)
    transformer = SD3Transformer2DModel(
        sample_size=16,
        patch_size=2,
        in_channels=16,
        num_layers=3,
        attention_head_dim=16,
        num_attention_heads=4,
        joint_attention_dim=t5_dim,
        caption_projection_dim=4 * 16,  # = heads x head_dim, as 1536 in 3.5-medium
        pooled_projection_dim=clip_l_dim + clip_g_dim,  # pooled CLIP-L and CLIP-G, concatenated
        out_channels=16,
        pos_embed_max_size=16,
        dual_attention_layers=(0, 1),
        qk_norm="rms_norm",
    )

    # vae: SD3's AutoencoderKL (block_out_channels 128..512, 16 latent channels, no quant convs,
    # scaling 1.5305, shift 0.0609). Four blocks keep the 8x downsampling.
    torch.manual_seed(seed)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(8, 16, 32, 32),
        layers_per_block=1,
        act_fn="silu",
        latent_channels=16,
        norm_num_groups=4,
        sample_size=128,
        scaling_factor=1.5305,
        shift_factor=0.0609,
        force_upcast=True,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )

    # scheduler: SD3.5-medium's scheduler_config.
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0)

    pipe = StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        text_encoder_2=text_encoder_2,
        tokenizer_2=tokenizer_2,
        text_encoder_3=text_encoder_3,
        tokenizer_3=tokenizer_3,
    )
    pipe.save_pretrained(path)
    for sub in ("tokenizer", "tokenizer_2"):
        _write_bpe_files(os.path.join(path, sub), clip_vocab, clip_merges)
    return path


# ----------------------------------------------------------------------------------------------
# Qwen-Image
# ----------------------------------------------------------------------------------------------

def build_qwen_image(path, seed=0):
    """Save a tiny QwenImagePipeline with the Qwen-Image architecture at `path`."""
    text_dim = 32
    tokenizer, vocab, merges = build_qwen_tokenizer()
    ids = tokenizer.convert_tokens_to_ids

    # text_encoder: Qwen/Qwen2.5-VL-7B-Instruct (hidden 3584, 28 layers, 28 heads / 4 kv heads of
    # 128, mrope_section [16, 24, 24], rope_theta 1e6). Head dim 16 here, so mrope_section is
    # scaled by 1/8. The pipeline uses only text; the vision tower is tiny but present, since
    # Qwen2_5_VLForConditionalGeneration always builds it.
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=text_dim,
            intermediate_size=2 * text_dim,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=128000,
            max_window_layers=2,  # = num_hidden_layers, as 28 in the real one (no sliding window)
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
            bos_token_id=ids("<|endoftext|>"),
            eos_token_id=ids("<|im_end|>"),
            pad_token_id=ids("<|endoftext|>"),
        ),
        vision_config=dict(  # 32 blocks of 1280 in the real one; full attention every 8th block
            depth=2,
            hidden_size=16,
            intermediate_size=32,
            num_heads=2,
            out_hidden_size=text_dim,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            window_size=112,
            fullatt_block_indexes=[1],
            tokens_per_second=2,
        ),
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    text_encoder = Qwen2_5_VLForConditionalGeneration(config)

    # transformer: Qwen/Qwen-Image (60 layers, 24 heads x 128, axes_dims_rope (16, 56, 56),
    # joint_attention_dim 3584 = text encoder width, in_channels 64 = 16 latents x 2x2 patch).
    # Head dim 32 here, so axes_dims_rope is scaled by 1/4.
    torch.manual_seed(seed)
    transformer = QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=64,
        out_channels=16,
        num_layers=2,
        attention_head_dim=32,
        num_attention_heads=2,
        joint_attention_dim=text_dim,
        guidance_embeds=False,
        axes_dims_rope=(4, 14, 14),
    )

    # vae: Qwen/Qwen-Image (base_dim 96, dim_mult [1, 2, 4, 4], 2 res blocks, z_dim 16,
    # temperal_downsample [False, True, True] -> 8x spatial). latents_mean/std keep the real
    # per-channel statistics (the class defaults).
    torch.manual_seed(seed)
    vae = AutoencoderKLQwenImage(
        base_dim=8,
        z_dim=16,
        dim_mult=[1, 2, 4, 4],
        num_res_blocks=1,
        attn_scales=[],
        temperal_downsample=[False, True, True],
        dropout=0.0,
    )

    # scheduler: Qwen/Qwen-Image's scheduler_config (dynamic exponential shifting; the pipeline
    # computes mu from base/max_image_seq_len and base/max_shift).
    scheduler = FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000,
        shift=1.0,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=0.9,
        base_image_seq_len=256,
        max_image_seq_len=8192,
        shift_terminal=0.02,
        time_shift_type="exponential",
    )

    pipe = QwenImagePipeline(
        scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer
    )
    pipe.save_pretrained(path)
    _write_bpe_files(os.path.join(path, "tokenizer"), vocab, merges)
    return path


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------

BUILDERS = {"sd3": build_sd3, "qwen_image": build_qwen_image}


def generate(path, dtype=torch.float32, seed=0, size=128, steps=2):
    """Load the saved pipeline through from_pretrained and make one image with classifier-free
    guidance on (SD3: guidance_scale; Qwen-Image: true_cfg_scale with a negative prompt)."""
    pipe = DiffusionPipeline.from_pretrained(path, dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    if isinstance(pipe, QwenImagePipeline):
        guidance = {"true_cfg_scale": 4.0, "negative_prompt": " "}
    else:
        guidance = {"guidance_scale": 4.5}
    return pipe(
        prompt=PROMPT,
        height=size,
        width=size,
        num_inference_steps=steps,
        generator=torch.Generator().manual_seed(seed),
        output_type="pil",
        **guidance,
    ).images[0]


def check(path, dtype):
    """Two same-seed runs must give the same 128x128 image; returns the seconds that the first
    one took (loading included)."""
    start = time.perf_counter()
    first = generate(path, dtype)
    elapsed = time.perf_counter() - start
    second = generate(path, dtype)
    assert first.size == (128, 128), first.size
    assert first.tobytes() == second.tobytes(), "same seed gave different images"
    return elapsed


def folder_size_mb(path):
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return total / 2**20


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=DEFAULT_OUT, help="pipelines go to OUT/sd3 and OUT/qwen_image")
    parser.add_argument("--which", choices=["sd3", "qwen_image", "both"], default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="then generate on CPU in float32 and bfloat16")
    args = parser.parse_args()

    names = list(BUILDERS) if args.which == "both" else [args.which]
    for name in names:
        path = os.path.join(args.out, name)
        start = time.perf_counter()
        BUILDERS[name](path, seed=args.seed)
        print(f"{name}: saved to {path} ({folder_size_mb(path):.1f} MB, {time.perf_counter() - start:.1f} s)")
        if args.check:
            for dtype in (torch.float32, torch.bfloat16):
                print(f"{name}: {dtype} 128x128, 2 steps, deterministic: {check(path, dtype):.1f} s")


if __name__ == "__main__":
    main()
