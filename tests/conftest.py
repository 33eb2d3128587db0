"""Session-wide test settings: one intra-op thread per test process.

The suite runs on 2 shared cores (often as ``pytest -n 2``); one thread per process avoids
oversubscription and makes CPU results independent of the thread count.
"""

import torch

torch.set_num_threads(1)
