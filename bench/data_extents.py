# SPDX-License-Identifier: LGPL-2.1-or-later
"""The allocated ranges of a sparse file, found with SEEK_DATA/SEEK_HOLE (holes are never read)."""
import os


def data_extents(path):
    """Returns [(start, end), ...] of the file's data ranges."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        extents, pos = [], 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            extents.append((start, end))
            pos = end
        return extents
    finally:
        os.close(fd)
