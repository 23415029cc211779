"""ResNet-18 and ViT-B/16 training steps on tpu: zero CPU fallbacks, same numbers as the CPU.

Issue 10's acceptance names these two models. torchvision's wheels on PyPI are CUDA builds (they
would pull a CUDA torch), so the architectures come from transformers, with the configs of the
real checkpoints (microsoft/resnet-18, google/vit-base-patch16-224) and seeded random weights.
One step = forward, cross-entropy, backward, optimizer step, in train mode (batch-norm statistics,
dropout off only because random bits differ between devices by design).
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

from helpers import DEV

transformers = pytest.importorskip("transformers")


def resnet18():
    # microsoft/resnet-18's config.json: basic blocks, depths [2, 2, 2, 2].
    config = transformers.ResNetConfig(embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2],
                                       layer_type="basic", hidden_act="relu", num_labels=1000)
    return transformers.ResNetForImageClassification(config), 224


def vit_b16():
    # google/vit-base-patch16-224: 12 layers, hidden 768, 12 heads, patch 16. The image is 64x64
    # (16 patches + CLS) instead of 224x224 so the CPU reference stays fast; every operator and
    # weight shape except the position table is the same.
    config = transformers.ViTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                    intermediate_size=3072, patch_size=16, image_size=64, num_labels=1000,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.ViTForImageClassification(config), 64


MODELS = {"resnet18": resnet18, "vit_b16": vit_b16}


def train_step(model, images, labels, device, optimizer):
    """One step; returns the loss, the gradients and the parameters after the update."""
    model = model.to(device).train()
    opt = optimizer(model.parameters())
    logits = model(pixel_values=images.to(device)).logits
    loss = F.cross_entropy(logits, labels.to(device))
    opt.zero_grad()
    loss.backward()
    grads = [p.grad.detach().cpu() for p in model.parameters()]
    opt.step()
    return loss.detach().cpu(), grads, [p.detach().cpu() for p in model.parameters()]


# The compared step uses SGD with momentum: Adam divides each gradient by its own magnitude, so
# a gradient entry that is ~0 (only rounding noise left) moves its weight by +-lr on either
# device and the comparison would measure noise. AdamW gets its own step, checked for
# fallbacks only (its parity is tests/python/test_optim.py's).
SGD = lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4)
ADAMW = lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)


def fallbacks_during(fn):
    before = torch_tpu._C._fallback_counts_since_start()
    result = fn()
    after = torch_tpu._C._fallback_counts_since_start()
    return result, {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}


def worst_error(results, reference):
    """Largest error of any entry, relative to the largest reference entry of its tensor; floored
    at 1e-6 of the largest entry overall, because gradients that are zero in exact arithmetic
    (a key projection's bias under softmax) hold only rounding noise on every device."""
    overall = max(r.abs().max() for r in reference)
    return max(((t.double() - r).abs().max() / torch.maximum(r.abs().max(), 1e-6 * overall)).item()
               for t, r in zip(results, reference))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_step_has_no_fallbacks_and_matches_cpu(name):
    torch.manual_seed(0)
    model, size = MODELS[name]()
    images = torch.randn(2, 3, size, size)
    labels = torch.tensor([3, 997])
    # The reference is the CPU in float64. A float32 step through 20 convolutions with batch
    # norm over 2 images (or 12 transformer layers) is not reproducible to PyTorch's default
    # float32 tolerance on any device, so tpu must be at least as accurate as the CPU's own
    # float32 step (measured: ResNet-18 CPU 7.7e-3 vs tpu 7.2e-6; ViT-B/16 3.8e-3 vs 3.2e-3).
    ref_loss, ref_grads, ref_params = train_step(copy.deepcopy(model).double(), images.double(), labels, "cpu", SGD)
    cpu_loss, cpu_grads, cpu_params = train_step(copy.deepcopy(model), images, labels, "cpu", SGD)

    (tpu_loss, tpu_grads, tpu_params), fallbacks = fallbacks_during(
        lambda: train_step(copy.deepcopy(model), images, labels, DEV, SGD))
    assert fallbacks == {}
    _, fallbacks = fallbacks_during(lambda: train_step(model, images, labels, DEV, ADAMW))
    assert fallbacks == {}

    for tpu, cpu, ref in ((tpu_grads, cpu_grads, ref_grads), (tpu_params, cpu_params, ref_params),
                          ([tpu_loss], [cpu_loss], [ref_loss])):
        tpu_error, cpu_error = worst_error(tpu, ref), worst_error(cpu, ref)
        assert tpu_error <= max(1.5 * cpu_error, 1e-5), (tpu_error, cpu_error)
