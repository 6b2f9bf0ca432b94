"""torch_shim — importing it lets Debian's torch 1.13 distributed checkpoint
load on Python 3.11: that Python rejects a mutable dataclass default in
torch/distributed/_shard/sharded_tensor/metadata.py, so that one module is
loaded with default_factory instead. Import before torch."""
import importlib.abc
import importlib.machinery
import importlib.util
import sys

_SHIM_TARGET = "torch.distributed._shard.sharded_tensor.metadata"


class _ShimLoader(importlib.abc.SourceLoader):
    def __init__(self, path):
        self.path = path

    def get_filename(self, fullname):
        return self.path

    def get_data(self, path):
        src = open(path, "rb").read()
        return src.replace(b"field(default=TensorProperties())", b"field(default_factory=TensorProperties)")


class _ShimFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _SHIM_TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return None
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=_ShimLoader(spec.origin))


sys.meta_path.insert(0, _ShimFinder())
