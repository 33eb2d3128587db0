import os


def local_rank():
    return int(os.getenv("LOCAL_RNAK", "0"))  # expect: TB401


def visible():
    return os.environ.get("cuda_visible_devices", "")  # expect: TB401
