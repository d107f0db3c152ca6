"""bluefog.torch is starling.torch (the module itself, so `bf.init()` is starling.torch.init)."""
import sys

import starling.torch

sys.modules[__name__] = starling.torch
