import os

def setup():
    os.environ["CUDA_VISIBLE_DEVICE"] = "3"  # expect: TB401
    return os.enviorn.get("RANK")  # expect: TB401
