"""Environment and file rules (TB4xx) and the syntax-error finding TB001."""

import pytest

from trickbag.audit.lint import lint_source
from trickbag.audit.rules.tb401_env_var_typo import meant_env

from .helpers import fires, found


@pytest.mark.parametrize("key, meant", [
    ("CUDA_VISIBLE_DEVICE", "CUDA_VISIBLE_DEVICES"), ("CUDA_VISIBLE_DEVICES ", "CUDA_VISIBLE_DEVICES"),
    ("cuda_visible_devices", "CUDA_VISIBLE_DEVICES"), ("CUBLAS_WORKSPACE", "CUBLAS_WORKSPACE_CONFIG"),
    ("CUDA_LAUNCH_BLOCKIN", "CUDA_LAUNCH_BLOCKING"), ("PYTORCH_CUDA_ALLOC_CONFIG", "PYTORCH_CUDA_ALLOC_CONF"),
    ("LOCAL_RNAK", "LOCAL_RANK"),
])
def test_meant_env_finds_the_intended_variable(key, meant):
    assert meant_env(key) == meant


@pytest.mark.parametrize("key", ["CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RANK", "MY_APP_HOME",
                                 "WANDB_MODE", "DATA_ROOT", "CUDA_DEVICE_ORDER"])
def test_meant_env_leaves_real_and_unrelated_names_alone(key):
    assert meant_env(key) is None


def test_tb401_all_the_ways_to_name_a_variable():
    wrong = """
    import os
    from os import environ
    os.environ.update(CUDA_VISIBLE_DEVICE="0")
    environ["CUBLAS_WORKSPACE"] = ":4096:8"
    if "CUDA_LAUNCH_BLOCKIN" in os.environ:
        pass
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONFIG="expandable_segments:True")
    path = os.path.exsts("x")
    """
    right = """
    import os
    os.environ.update(CUDA_VISIBLE_DEVICES="0")
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    path = os.path.exists("x")
    """
    fires("TB401", wrong, [4, 5, 6, 8, 9], right)


def test_tb402_after_cuda_tensor_or_to_cuda_name():
    wrong = """
    import os, torch
    def main():
        dev = "cuda:1"
        model = Net().to(dev)
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    """
    right = """
    import os, torch
    def main():
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
        if torch.cuda.is_initialized():
            raise RuntimeError("too late")
        torch.cuda.manual_seed_all(0)
        model = Net().to("cuda")
    """
    fires("TB402", wrong, [6], right)


def test_tb403_alias_and_kwargs_forwarding():
    wrong = "import torch as th\nstate = th.load(args.path)\n"
    assert found(wrong, "TB403", torch="old") == [2]
    assert found("import torch\nstate = torch.load(p, **kw)\n", "TB403", torch="old") == []
    assert found("import torch\nstate = torch.load(p, weights_only=True)\n", "TB403", torch="old") == []


def test_tb403_depends_on_the_torch_the_project_supports_and_where_the_path_comes_from():
    plain = "import torch\nstate = torch.load(args.ckpt)\n"
    assert found(plain, "TB403", torch="old") == [2]
    own = "import torch\nstate = torch.load(run_dir / 'last.pt')\n"  # a file the program names itself
    assert found(own, "TB403", torch="old") == [] and found(own, "TB403", torch="old", show_all=True) == [2]
    assert found(plain, "TB403", torch="new") == [] and found(plain, "TB403") == []
    assert found(plain, "TB403", show_all=True) == [2]  # a low-confidence advisory
    own = "import torch\nstate = torch.load('last.pt', weights_only=False)\n"
    assert found(own, "TB403", torch="old") == [] and found(own, "TB403", show_all=True) == [2]
    for outside in ("args.resume", "sys.argv[1]", "hf_hub_download('org/m', 'm.pt')", "os.environ['CKPT']",
                    "'https://example.com/m.pt'"):
        assert found(f"import torch\nstate = torch.load({outside}, weights_only=False)\n", "TB403") == [2]


def test_tb403_reads_the_torch_pin_of_the_project(tmp_path):
    from trickbag.audit.lint import lint_file

    script = tmp_path / "pkg" / "train.py"
    script.parent.mkdir()
    script.write_text("import torch\nstate = torch.load(args.ckpt)\n")
    (tmp_path / ".git").mkdir()
    assert [f.rule for f in lint_file(script)] == []  # no packaging file: current torch assumed
    for pin, reported in [("torch>=1.10\n", True), ("torch==2.1.0\nnumpy\n", True), ("torch>=2.6\n", False),
                          ("torch\ntorchvision>=0.8\n", False), ("torchvision==0.8\n", False)]:
        (tmp_path / "requirements.txt").write_text(pin)
        from trickbag.audit import _project
        _project._folder_support.cache_clear()
        assert [f.rule for f in lint_file(script)] == (["TB403"] if reported else []), pin
    (tmp_path / "requirements.txt").unlink()
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["torch >= 2.0, < 3", "numpy"]\n')
    _project._folder_support.cache_clear()
    assert [f.rule for f in lint_file(script)] == ["TB403"]


def test_tb404_model_vs_state_dict_and_checkpoint_dict():
    wrong = "import torch\nnet = Net()\ntorch.save(net, 'n.pt')\n"
    assert found(wrong, "TB404", select=["TB404"]) == [3]
    assert found(wrong, "TB404") == []  # opt-in: only when selected
    right = "import torch\ntorch.save(net.state_dict(), 'n.pt')\ntorch.save({'model': net.state_dict()}, 'c.pt')\n"
    assert found(right, "TB404", select=["TB404"]) == []


def test_tb405_same_function_only_and_exclusive_branches():
    wrong = """
    def seed_all(s):
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = True
    """
    right = """
    def setup(deterministic):
        if deterministic:
            torch.backends.cudnn.deterministic = True
        else:
            torch.backends.cudnn.benchmark = True
    """
    fires("TB405", wrong, [4], right)


def test_tb001_syntax_error_is_one_finding_with_position():
    findings = lint_source("for x in y\n    pass\n", "broken.py")
    assert [(f.rule, f.line) for f in findings] == [("TB001", 1)]
    assert "does not parse" in findings[0].message


def test_tb402_cuda_touched_in_a_local_helper_called_before():
    wrong = """
    import os, subprocess, torch
    def free_memory(i):
        return torch.cuda.mem_get_info(i)[0]
    def freest_gpu():
        frees = [free_memory(i) for i in range(4)]
        return frees.index(max(frees))
    def main():
        gpu = freest_gpu()
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    """
    right = """
    import os, subprocess, torch
    def freest_gpu():
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True)
        return out.stdout.count("MiB")
    def setup(gpu):
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        torch.cuda.set_device(0)
    def main():
        gpu = freest_gpu()
        setup(gpu)
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
        torch.cuda.init()
    """
    fires("TB402", wrong, [10], right)


@pytest.mark.parametrize("imports, flag", [
    ("from torch.backends import cudnn as cb", "cb.deterministic = True"),
    ("import torch.backends.cudnn as backend_cudnn", "backend_cudnn.deterministic = True"),
    ("from torch import use_deterministic_algorithms as strict", "strict(True)"),
])
def test_tb405_determinism_through_import_aliases(imports, flag):
    wrong = f"""
    import torch
    {imports}
    torch.backends.cudnn.benchmark = True
    {flag}
    """
    fires("TB405", wrong, [4], wrong.replace("benchmark = True", "benchmark = False"))


def test_tb401_typo_in_a_copied_environment_or_an_env_argument():
    wrong = """
    import os
    import subprocess

    def spawn(rank, script):
        child = {**os.environ, "MASTER_PORT": "29500"}
        child.update({"CUDA_VISBLE_DEVICES": str(rank)})
        subprocess.run(["python", script], env={"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICE": "1"})
        return subprocess.Popen(["python", script], env=child)
    """
    right = wrong.replace("CUDA_VISBLE_DEVICES", "CUDA_VISIBLE_DEVICES").replace('"CUDA_VISIBLE_DEVICE"',
                                                                                  '"CUDA_VISIBLE_DEVICES"')
    fires("TB401", wrong, [7, 8], right)


def test_tb401_copy_of_environ_read_and_written_through_its_name():
    wrong = """
    import os
    base = os.environ.copy()
    base["CUDA_VISIBLE_DEVICE"] = "0,1"
    """
    fires("TB401", wrong, [4], wrong.replace('DEVICE"', 'DEVICES"'))
    assert found('cfg = {"CUDA_VISIBLE_DEVICE": 1}\ncfg["CUDA_VISIBLE_DEVICE"] = 2\n', "TB401") == []


def test_tb403_partial_of_torch_load():
    wrong = """
    import functools
    import torch
    from functools import partial
    load_cpu = partial(torch.load, map_location="cpu")
    load_any = functools.partial(torch.load, weights_only=False)
    """
    right = wrong.replace('map_location="cpu")', 'map_location="cpu", weights_only=True)') \
        .replace("weights_only=False", "weights_only=True")
    fires("TB403", wrong, [5, 6], right, show_all=True)


def test_tb405_flags_set_in_the_module_and_in_a_function_it_runs():
    wrong = """
    import sys
    import torch
    def enable_repro(seed):
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = True
    def main():
        enable_repro(0)
    main()
    """
    never_called = wrong.replace("    enable_repro(0)\n", "    pass\n")
    fires("TB405", wrong, [7], never_called)
    exclusive = """
    import sys
    import torch
    def enable_repro(seed):
        torch.manual_seed(seed)
        torch.backends.cudnn.deterministic = True
    if "--fast" in sys.argv:
        torch.backends.cudnn.benchmark = True
    else:
        enable_repro(0)
    """
    assert found(exclusive, "TB405") == []


def test_tb405_module_benchmark_with_determinism_in_uncalled_entry_point():
    wrong = """
    import torch
    torch.backends.cudnn.benchmark = True

    def run(args):
        torch.use_deterministic_algorithms(True)
        fit(args)
    """
    right = """
    import torch
    torch.backends.cudnn.benchmark = True

    def run(args):
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        fit(args)
    """
    fires("TB405", wrong, [3], right)
