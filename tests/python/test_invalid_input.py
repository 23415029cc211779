"""Input the CPU rejects is rejected on tpu too, with the CPU's exception type; checks that need
the data (indices, targets, mask counts) run on the device and raise at the next host sync in
the thread that launched the op; Ctrl-C inside the engine is never swallowed."""
import threading

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

X = torch.randn(4, 5)


def on(device, *xs):
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def raises_like_cpu(f, *xs):
    """f raises on the CPU; the tpu call (plus a host sync) raises the same exception type."""
    with pytest.raises(Exception) as cpu:
        f(*xs)
    with pytest.raises(type(cpu.value)) as tpu:
        r = f(*on("tpu", *xs))
        if isinstance(r, torch.Tensor):
            r.cpu()
    assert "PJRT" not in str(tpu.value), f"internal error instead of the user's: {tpu.value}"
    return tpu.value


CASES = {
    "index_select negative": (lambda x, i: torch.index_select(x, 0, i), X, torch.tensor([0, -1])),
    "index_select past end": (lambda x, i: torch.index_select(x, 1, i), X, torch.tensor([5])),
    "gather negative": (lambda x, i: torch.gather(x, 1, i), X, torch.tensor([[0, -1]] * 4)),
    "gather past end": (lambda x, i: torch.gather(x, 0, i), X, torch.tensor([[4]])),
    "scatter past end": (lambda x, i: x.scatter(0, i, 1.0), X, torch.tensor([[5, 0, 0, 0, 0]])),
    "scatter_add negative": (lambda x, i: x.scatter_add(0, i, torch.ones(1, 1, device=x.device)), X, torch.tensor([[-1]])),
    "index_add negative": (lambda x, i: x.index_add(0, i, torch.ones(1, 5, device=x.device)), X, torch.tensor([-1])),
    "index_copy past end": (lambda x, i: x.index_copy(0, i, torch.ones(1, 5, device=x.device)), X, torch.tensor([4])),
    "embedding negative": (lambda w, i: F.embedding(i, w), X, torch.tensor([-1])),
    "nll_loss target past end": (lambda x, t: F.nll_loss(x, t), X.log_softmax(1), torch.tensor([0, 1, 7, 2])),
    "cross_entropy negative target": (lambda x, t: F.cross_entropy(x, t), X, torch.tensor([0, 1, -3, 2])),
    "masked_scatter short source": (lambda x, m, s: x.masked_scatter(m, s), X, X > -10, torch.randn(3)),
    "int mul_ by a float": (lambda x: x.mul_(1.5), torch.arange(4)),
    "int add_ of a float tensor": (lambda x, y: x.add_(y), torch.arange(4), torch.rand(4)),
    "int clamp_ to a float": (lambda x: x.clamp_(min=0.5), torch.arange(4)),
    "int sqrt_": (lambda x: x.sqrt_(), torch.arange(4)),
    "bool sub_": (lambda x: x.sub_(True), torch.tensor([True, False])),
    "bool sub": (lambda x: x - x, torch.tensor([True, False])),
    "var of ints": (lambda x: x.var(), torch.arange(4)),
    "std of ints": (lambda x: x.std(dim=0), torch.arange(4)),
    "argmax of bool": (lambda x: x.argmax(), torch.tensor([True, False])),
    "argmin of bool": (lambda x: x.argmin(0), torch.tensor([True, False])),
    "addmm with 3-D self": (lambda s, a, b: torch.addmm(s, a, b), torch.randn(2, 3, 3), torch.randn(3, 3), torch.randn(3, 3)),
    "index_put_ value too long": (lambda x, i, v: x.index_put_((i,), v), X, torch.tensor([0, 1]), torch.randn(3, 5)),
    "index_put_ value too wide": (lambda x, i, v: x.index_put_((i,), v), X, torch.tensor([0, 1]), torch.randn(2, 4)),
    "bitwise_and of floats": (lambda x: x & x, torch.randn(3)),
    "bitwise_not of floats": (lambda x: ~x, torch.randn(3)),
    "softmax of ints": (lambda x: torch.softmax(x, 0), torch.arange(3)),
    "log_softmax of ints": (lambda x: torch.log_softmax(x, 0), torch.arange(3)),
    "slice_scatter of a 0-d tensor": (lambda x, s: torch.slice_scatter(x, s, 0), torch.tensor(0.0), torch.tensor(-3.0)),
    "select_scatter of a 0-d tensor": (lambda x, s: torch.select_scatter(x, s, -1, 2), torch.tensor(0.0), torch.tensor(-3.0)),
    "adaptive_max_pool3d_backward of a 1-D gradient": (
        lambda g, x, i: torch.ops.aten.adaptive_max_pool3d_backward(g, x, i), torch.randn(7), torch.tensor(1.0),
        torch.arange(7)),
    "int div trunc by zero": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), torch.tensor([1, 2]), torch.tensor([0, 1])),
}


@pytest.mark.parametrize("case", CASES)
def test_rejected_like_cpu(case):
    f, *xs = CASES[case]
    raises_like_cpu(f, *[x.clone() if isinstance(x, torch.Tensor) else x for x in xs])


def test_valid_neighbours_still_work():
    """The checks above must not reject what the CPU accepts."""
    x = X.to("tpu")
    torch.testing.assert_close(x.index_select(0, torch.tensor([3, 0], device="tpu")).cpu(), X.index_select(0, torch.tensor([3, 0])))
    torch.testing.assert_close(x[torch.tensor([-1, 0], device="tpu")].cpu(), X[torch.tensor([-1, 0])])
    t = torch.tensor([0, 1, -100, 2])
    torch.testing.assert_close(F.cross_entropy(x, t.to("tpu")).cpu(), F.cross_entropy(X, t))
    torch.testing.assert_close(F.nll_loss(x, torch.tensor([0, 9, 1, 9], device="tpu"), ignore_index=9).cpu(),
                               F.nll_loss(X, torch.tensor([0, 9, 1, 9]), ignore_index=9))
    src = torch.randn(25)
    torch.testing.assert_close(x.masked_scatter(x > 0, src.to("tpu")).cpu(), X.masked_scatter(X > 0, src))
    f = torch.ones(3, device="tpu")
    f.mul_(torch.tensor([2, 3, 4], device="tpu"))  # float self, int other: allowed
    assert f.cpu().tolist() == [2.0, 3.0, 4.0]
    b = torch.tensor([True, False], device="tpu")
    assert b.eq_(torch.tensor([True, True], device="tpu")).cpu().tolist() == [True, False]
    i = torch.arange(4, device="tpu")
    assert i.lt_(2.5).cpu().tolist() == [1, 1, 1, 0]  # comparisons into an int self are allowed
    bias = torch.randn(3)
    torch.testing.assert_close(torch.addmm(bias.to("tpu"), x[:3, :3], x[:3, :3]).cpu(), torch.addmm(bias, X[:3, :3], X[:3, :3]))


def test_device_errors_raise_the_cpu_exception_type_at_the_next_sync():
    x = X.to("tpu")
    y = torch.gather(x, 1, torch.tensor([[9]] * 4, device="tpu"))  # no error yet: asynchronous
    with pytest.raises(RuntimeError, match="out of range.*detected on the device"):
        y.cpu()
    y = torch.index_select(x, 0, torch.tensor([9], device="tpu"))
    with pytest.raises(IndexError, match="out of range"):
        torch.tpu.synchronize()
    assert (x + 1).cpu().shape == (4, 5)  # the device stays usable


def test_device_error_is_raised_in_the_thread_that_caused_it():
    x = X.to("tpu")
    bad = torch.tensor([9], device="tpu")
    caught = []

    def worker():
        try:
            torch.index_select(x, 0, bad).cpu()
        except IndexError as e:
            caught.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert len(caught) == 1
    # Another thread's failure never surfaces here.
    torch.index_select(x, 0, bad)  # launched in this thread, not read

    other_ok = []
    t = threading.Thread(target=lambda: other_ok.append((x * 2).cpu().shape))
    t.start()
    t.join()
    assert other_ok == [torch.Size([4, 5])]
    with pytest.raises(IndexError):
        torch.tpu.synchronize()


def test_keyboard_interrupt_in_a_meta_kernel_propagates():
    """Ctrl-C while the engine runs a (Python) meta kernel must stop the program, not send the
    op to the CPU fallback."""
    lib = torch.library.Library("aten", "IMPL")

    def interrupted_meta(a, b):
        raise KeyboardInterrupt

    x = torch.randn(3).to("tpu")
    torch_tpu._C._clear_executable_caches()
    lib.impl("atan2", interrupted_meta, "Meta", allow_override=True)
    try:
        before = dict(torch_tpu.metrics.counters()["fallbacks"])
        with pytest.raises(KeyboardInterrupt):
            torch.atan2(x, x + 1)
        assert dict(torch_tpu.metrics.counters()["fallbacks"]) == before
    finally:
        lib._destroy()
    torch.testing.assert_close(torch.atan2(x, x + 1).cpu(), torch.atan2(x.cpu(), x.cpu() + 1))


def test_compiled_graph_rejects_like_eager():
    f = torch.compile(lambda x: x.argmax(), backend="tpu", fullgraph=True)
    with pytest.raises(RuntimeError, match="does not support bool"):
        f(torch.tensor([True, False], device="tpu"))
