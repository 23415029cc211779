"""Calls where tpu once answered differently from PyTorch on the CPU without saying so: out= dtypes
the CPU refuses, matrix products of two dtypes, sub with a bool, index_select from nothing,
pickling, resize_ past the device's memory. Each is checked against the CPU's own behaviour."""
import io
import pickle
import re

import pytest
import torch
import torch.nn.functional as F

from helpers import DEV


def raises_like_cpu(f, *xs):
    """f raises on the CPU and on tpu copies of xs, with the same exception type and message."""
    with pytest.raises(Exception) as cpu:
        f(*xs)
    with pytest.raises(type(cpu.value), match=re.escape(str(cpu.value).splitlines()[0])):
        f(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in xs])


def same_as_cpu(f, *xs):
    got = f(*[x.to(DEV) if isinstance(x, torch.Tensor) else x for x in xs])
    want = f(*xs)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


OUT_DTYPE_CALLS = [
    # (op, input dtype, out dtype): the CPU's same-dtype ops (TensorIterator checks every operand)
    (torch.neg, torch.int64, torch.int32),
    (torch.neg, torch.int32, torch.uint8),
    (torch.neg, torch.float32, torch.float64),
    (torch.bitwise_not, torch.int32, torch.int64),
    (torch.round, torch.float64, torch.float32),
    (F.hardtanh, torch.int64, torch.int32),
    # generated out= wrappers want the exact dtype
    (torch.isnan, torch.float32, torch.int32),
    (torch.clone, torch.float32, torch.float64),
    # promoting ops refuse an unsafe cast
    (torch.angle, torch.int64, torch.int32),
]


@pytest.mark.parametrize("op,dtype,out_dtype", OUT_DTYPE_CALLS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_out_of_a_dtype_the_cpu_refuses_raises_its_error(op, dtype, out_dtype):
    x = torch.tensor([1, 2, -3]).to(dtype)
    raises_like_cpu(lambda x, o: op(x, out=o), x, torch.empty(3, dtype=out_dtype))


@pytest.mark.parametrize("call", [
    lambda x, o: torch.add(x, x, out=o),           # int + int into float: a safe cast
    lambda x, o: torch.sin(x, out=o),              # int input, float out
    lambda x, o: torch.eq(x, 2, out=o.bool()),     # comparisons write bool
    lambda x, o: torch.neg(x.double(), out=o),     # the same dtype
])
def test_out_of_a_dtype_the_cpu_accepts_still_works(call):
    x = torch.tensor([1, 2, -3])
    o = torch.empty(3, dtype=torch.float64)
    got, want = call(x.to(DEV), o.to(DEV)), call(x, o)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("f", [
    lambda a, b: a @ b,
    lambda a, b: torch.mm(b, a),
    lambda a, b: torch.addmm(b, a, b),
    lambda a, b: torch.mv(a, b[0]),
    lambda a, b: torch.dot(a[0], b[0]),
    lambda a, b: torch.baddbmm(b[None], a[None], b[None]),
    lambda a, b: F.linear(b, a),                   # a bfloat16 Linear on float32 input
])
def test_matrix_products_of_two_dtypes_raise_like_cpu(f):
    a = torch.randn(3, 3).bfloat16()
    b = torch.randn(3, 3)
    raises_like_cpu(f, a, b)


def test_matrix_products_of_one_dtype_still_work():
    a, b = torch.randn(3, 4).bfloat16(), torch.randn(4, 2).bfloat16()
    same_as_cpu(torch.mm, a, b)
    same_as_cpu(lambda x, w: F.linear(x, w), torch.randn(2, 4), torch.randn(3, 4))


@pytest.mark.parametrize("f", [
    lambda x, m: torch.sub(x, True),
    lambda x, m: torch.rsub(x, True),
    lambda x, m: x - m,
    lambda x, m: m - x,
    lambda x, m: x.sub_(m),
])
def test_sub_with_a_bool_raises_like_cpu(f):
    raises_like_cpu(f, torch.tensor([1.0, 2.0, 3.0]), torch.tensor([True, False, True]))


def test_sub_with_numbers_still_works():
    same_as_cpu(lambda x: torch.sub(x, 1, alpha=2), torch.tensor([1.0, 2.0, 3.0]))
    same_as_cpu(lambda x: (x > 1).logical_xor(x < 3), torch.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("shape", [(0, 3), (0,)])
def test_index_select_from_an_empty_dim_raises_like_cpu(shape):
    raises_like_cpu(lambda x, i: x.index_select(0, i), torch.empty(shape), torch.tensor([0]))


def test_index_select_of_nothing_from_an_empty_dim_is_empty():
    same_as_cpu(lambda x, i: x.index_select(0, i), torch.empty(0, 3), torch.tensor([], dtype=torch.long))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.complex64])
def test_tpu_tensors_pickle_and_come_back_on_tpu(dtype):
    x = (torch.arange(6) - 2).to(dtype).reshape(2, 3)
    back = pickle.loads(pickle.dumps(x.to(DEV)[:, 1:]))
    assert back.device.type == DEV and back.dtype == dtype and back.shape == (2, 2)
    torch.testing.assert_close(back.cpu(), x[:, 1:])


def test_deepcopy_of_a_view_copies_its_storage_on_tpu():
    import copy
    x = torch.arange(6.0).reshape(2, 3)
    view = x.to(DEV)[:, 1:]
    back = copy.deepcopy(view)
    assert back.device.type == DEV and back.untyped_storage().data_ptr() != view.untyped_storage().data_ptr()
    torch.testing.assert_close(back.cpu(), x[:, 1:])


def test_a_tpu_tensor_on_a_multiprocessing_queue_raises_pytorchs_error():
    # PyTorch's sharing reducers know CPU and CUDA storages only (docs/limits.md, "Pickling").
    from multiprocessing.reduction import ForkingPickler
    import torch.multiprocessing  # noqa: F401  (registers the tensor reducers)
    with pytest.raises(RuntimeError, match="only available on CPU"):
        ForkingPickler(io.BytesIO()).dump(torch.ones(2, device=DEV))


def test_legacy_torch_save_of_tpu_tensors_round_trips():
    x = torch.randn(3, 4)
    buf = io.BytesIO()
    torch.save({"w": x.to(DEV)}, buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    back = torch.load(buf)["w"]
    assert back.device.type == DEV
    torch.testing.assert_close(back.cpu(), x)


def test_resize_past_device_memory_is_an_out_of_memory_error():
    x = torch.ones(4, device=DEV)
    with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory"):
        x.resize_(2**45)
    torch.testing.assert_close(x.cpu(), torch.ones(4))  # the tensor is unchanged and usable
