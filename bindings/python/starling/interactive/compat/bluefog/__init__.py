"""`bluefog` for programs written for BlueFog's ibfrun: on the engines that `starlingrun
start` starts (and only there, when no real bluefog is installed), `import bluefog.torch
as bf` gives starling.torch, the drop-in."""
