# TB401 env-var-typo: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import os
import subprocess


def pick_gpu():
    os.environ["CUDA_VISIBLE_DEVICE"] = "1"  # expect: TB401


def pick_gpu_right():
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"


def deterministic_cublas():
    os.environ["CUBLAS_WORKSPACE"] = ":4096:8"  # expect: TB401


def own_variable():
    return os.environ.get("MY_PROJECT_DATA_ROOT", "./data")  # the project's own name: not a typo


def child_env(cmd):
    env = os.environ.copy()
    env["CUDA_VISIBLE_DEVICE"] = "0"  # expect: TB401
    subprocess.run(cmd, env=env)
