#!/usr/bin/env python3
"""16 KB page alignment of shared libraries (Android 15+ devices may use 16 KB memory pages).

    check_elf_alignment.py [--min BYTES] FILE.so...

Reads the ELF64 program headers of each file and prints the file with the p_align of each PT_LOAD
segment. Exits 1 if any PT_LOAD segment is aligned to less than --min (16384), 2 if a file is not
a 64-bit ELF file or cannot be read. Python 3 standard library only.
"""

import argparse
import struct
import sys

PT_LOAD = 1
PAGE_16K = 16384


def load_alignments(path):
    """The p_align of each PT_LOAD program header of the ELF64 file at path, in order."""
    with open(path, "rb") as f:
        ident = f.read(16)
        if len(ident) < 16 or ident[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        if ident[4] != 2:
            raise ValueError("not a 64-bit ELF file (EI_CLASS %d)" % ident[4])
        if ident[5] not in (1, 2):
            raise ValueError("unknown byte order (EI_DATA %d)" % ident[5])
        order = "<" if ident[5] == 1 else ">"
        # Elf64_Ehdr after e_ident: e_type, e_machine (H), e_version (I), e_entry, e_phoff,
        # e_shoff (Q), e_flags (I), e_ehsize, e_phentsize, e_phnum (H), ...
        header = f.read(48)
        if len(header) < 48:
            raise ValueError("truncated ELF header")
        e_phoff, = struct.unpack_from(order + "Q", header, 0x20 - 16)
        e_phentsize, e_phnum = struct.unpack_from(order + "HH", header, 0x36 - 16)
        if e_phnum and e_phentsize < 56:
            raise ValueError("program header entries of %d bytes" % e_phentsize)
        aligns = []
        for i in range(e_phnum):
            f.seek(e_phoff + i * e_phentsize)
            entry = f.read(56)
            if len(entry) < 56:
                raise ValueError("truncated program header %d" % i)
            # Elf64_Phdr: p_type, p_flags (I), p_offset, p_vaddr, p_paddr, p_filesz, p_memsz,
            # p_align (Q).
            p_type, = struct.unpack_from(order + "I", entry, 0)
            p_align, = struct.unpack_from(order + "Q", entry, 48)
            if p_type == PT_LOAD:
                aligns.append(p_align)
        return aligns


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--min", type=int, default=PAGE_16K, help="smallest p_align allowed (%(default)s)")
    parser.add_argument("files", nargs="+", metavar="FILE.so")
    args = parser.parse_args(argv)

    status = 0
    for path in args.files:
        try:
            aligns = load_alignments(path)
        except (OSError, ValueError) as e:
            print("%s: error: %s" % (path, e))
            status = max(status, 2)
            continue
        if not aligns:
            print("%s: error: no PT_LOAD segment" % path)
            status = max(status, 2)
            continue
        low = [a for a in aligns if a < args.min]
        verdict = "ok" if not low else "FAIL (%d below %d)" % (len(low), args.min)
        print("%s: PT_LOAD p_align %s: %s" % (path, " ".join(str(a) for a in aligns), verdict))
        if low:
            status = max(status, 1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
