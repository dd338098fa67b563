"""WebDataset tars for the fields tests: each sample's members written in
the order given, a key's members next to each other."""
import io
import tarfile


def write_tar(path, samples):
    """samples: [(key, {ext: bytes})], members in the given order."""
    with tarfile.open(path, "w") as tar:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
