"""Which chips are TPUs, and which chip a torchrun process drives (torch_tpu/_tpu_host.py).

The host here has no TPU, so the sysfs trees are built in tmp_path and the environment is a dict;
the functions under test are the ones `_discovery.find_plugin` runs before libtpu loads."""
import os
import subprocess
import sys
import warnings

import pytest

from torch_tpu import _discovery, _tpu_host


def _pci(root, devices):
    for i, (vendor, device) in enumerate(devices):
        d = root / f"0000:00:{i:02x}.0"
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "device").write_text(device + "\n")
    return str(root)


def test_google_network_card_and_disk_are_not_tpus(tmp_path):
    # A GCE VM: gVNIC (1ae0:0042), NVMe persistent disk (1ae0:001f), an Intel bridge.
    root = _pci(tmp_path, [("0x1ae0", "0x0042"), ("0x1ae0", "0x001f"), ("0x8086", "0x1237")])
    assert _tpu_host.tpu_chips(root) == []


def test_tpu_chips_are_counted_by_generation(tmp_path):
    root = _pci(tmp_path, [("0x1ae0", "0x0042")] + [("0x1AE0", "0x006F")] * 4)
    assert _tpu_host.tpu_chips(root) == ["v6e"] * 4


def test_unreadable_pci_entries_are_skipped(tmp_path):
    root = _pci(tmp_path, [("0x1ae0", "0x0063")])
    (tmp_path / "0000:00:1f.0").mkdir()  # no vendor/device files
    assert _tpu_host.tpu_chips(root) == ["v5e"]
    assert _tpu_host.tpu_chips(str(tmp_path / "missing")) == []


def test_torchrun_on_a_four_chip_host_gives_each_process_its_chip():
    env = {"LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "RANK": "2"}
    variables, problem = _tpu_host.one_chip_per_process_env(env, 4)
    assert variables == {
        "TPU_VISIBLE_CHIPS": "2",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "2,2,1",
        "TPU_PROCESS_PORT": "8478",
        "TPU_PROCESS_ADDRESSES": "localhost:8476,localhost:8477,localhost:8478,localhost:8479",
        "CLOUD_TPU_TASK_ID": "2",
    }
    assert problem is None


def test_eight_chip_host_and_base_port():
    env = {"LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "8", "LOCAL_RANK": "7", "TORCH_TPU_PROCESS_BASE_PORT": "9000"}
    variables, _ = _tpu_host.one_chip_per_process_env(env, 8)
    assert variables["TPU_PROCESS_BOUNDS"] == "2,4,1"
    assert variables["TPU_PROCESS_PORT"] == "9007"
    assert variables["TPU_PROCESS_ADDRESSES"].split(",")[0] == "localhost:9000"


@pytest.mark.parametrize("env", [
    {},
    {"LOCAL_WORLD_SIZE": "1", "LOCAL_RANK": "0"},
    {"LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "0", "TPU_VISIBLE_CHIPS": "3"},
], ids=["no launcher", "one process", "placement given"])
def test_nothing_to_do_and_nothing_to_say(env):
    assert _tpu_host.one_chip_per_process_env(env, 4) == ({}, None)


@pytest.mark.parametrize("env, problem", [
    ({"LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "16"}, "several hosts"),
    ({"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}, "2 processes for 4 chips"),
    ({"LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "5", "WORLD_SIZE": "4"}, "outside 0..3"),
    ({"LOCAL_WORLD_SIZE": "four"}, "not an integer"),
    ({"LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "0", "TORCH_TPU_PROCESS_BASE_PORT": "x"}, "not an integer"),
])
def test_nothing_is_set_when_the_placement_cannot_be_derived(env, problem):
    variables, why = _tpu_host.one_chip_per_process_env(env, 4)
    assert variables == {}
    assert problem in why


def test_placement_sets_only_unset_variables_and_warns_when_it_cannot(monkeypatch):
    for name in ("TPU_VISIBLE_CHIPS", "TPU_PROCESS_BOUNDS", "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_PROCESS_PORT",
                 "TPU_PROCESS_ADDRESSES", "CLOUD_TPU_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("CLOUD_TPU_TASK_ID", "11")  # a launcher's value wins
    _discovery._place_this_process(4)
    assert os.environ["TPU_VISIBLE_CHIPS"] == "1"
    assert os.environ["TPU_PROCESS_PORT"] == "8477"
    assert os.environ["CLOUD_TPU_TASK_ID"] == "11"

    monkeypatch.delenv("TPU_VISIBLE_CHIPS")
    monkeypatch.delenv("TPU_PROCESS_BOUNDS")
    monkeypatch.delenv("TPU_CHIPS_PER_PROCESS_BOUNDS")
    with pytest.warns(RuntimeWarning, match="4 processes for 8 chips"):
        _discovery._place_this_process(8)
    assert "TPU_VISIBLE_CHIPS" not in os.environ

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "four")  # never an exception at import, only a warning
    with pytest.warns(RuntimeWarning, match="not an integer"):
        _discovery._place_this_process(8)

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _discovery._place_this_process(8)  # a lone process drives every chip: nothing to say


def test_cpu_host_under_torchrun_sets_no_tpu_variables():
    # This host has no TPU chip (a gVNIC would not count): the CPU plugin, and libtpu's
    # placement variables stay unset even with torchrun's environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_") and k != "CLOUD_TPU_TASK_ID"}
    env.update(LOCAL_WORLD_SIZE="2", LOCAL_RANK="1", WORLD_SIZE="2", RANK="1", TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_PJRT_PLUGIN", None)
    script = ("import os, torch, torch_tpu; "
              "print(torch_tpu._plugin.kind, sorted(k for k in os.environ if k.startswith('TPU_') and k != "
              "'TPU_SKIP_MDS_QUERY'))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    if _discovery.tpu_on_pci_bus():
        pytest.skip("this host has a TPU")  # the assertion below is about hosts without one
    assert out.stdout.split()[0] == "cpu"
    assert out.stdout.strip().endswith("[]")
