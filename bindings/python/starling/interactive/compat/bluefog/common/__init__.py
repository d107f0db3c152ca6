"""bluefog.common: only topology_util, the part BlueFog programs import."""
