"""bluefog.common.topology_util is starling.topology_util."""
import sys

import starling.topology_util

sys.modules[__name__] = starling.topology_util
