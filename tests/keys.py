#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# The secrets of a passphrase-sealed repository, computed independently of blkvault from
# docs/FORMAT.md ("Keys and identities", "Key file"): prints one hex secret per line, labelled
# (kek, master, the five subkeys). The master secret is checked against the config's MAC, so a
# wrong derivation fails here instead of making a search for the keys vacuous. With CORE files,
# searches them for every secret (the passphrase too) instead, and fails naming what it found.
# With --pid PID LABEL..., searches the memory of a running process (stopped meanwhile; root reads
# /proc/PID/mem of a non-dumpable process too) for every secret, prints how often each occurs, and
# fails if one of the LABELs is found: what a process no longer needs must be gone.
# Usage: keys.py REPO PASSPHRASE [CORE...] | keys.py REPO PASSPHRASE --pid PID LABEL...
import hashlib, hmac, json, subprocess, sys

repo, passphrase = sys.argv[1], sys.argv[2].encode()
cfg = json.load(open(f"{repo}/config"))
key = json.load(open(f"{repo}/keys/default"))
kdf = key["kdf"]
assert kdf["algorithm"] == "scrypt" and key["cipher"] == "aes-256-gcm", key
kek = hashlib.scrypt(passphrase, salt=bytes.fromhex(kdf["salt"]), n=1 << kdf["log2_n"], r=kdf["r"],
                     p=kdf["p"], maxmem=(1 << 31) - 1, dklen=32)
# AES-256-GCM with a 96-bit nonce encrypts with AES-CTR from the counter block nonce || 2
sealed = bytes.fromhex(key["sealed"])
master = subprocess.run(["openssl", "enc", "-d", "-aes-256-ctr", "-nopad", "-K", kek.hex(),
                         "-iv", key["nonce"] + "00000002"], input=sealed[:32], capture_output=True,
                        check=True).stdout
assert len(master) == 32


def hkdf(ikm, salt, info):
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


repo_id = bytes.fromhex(cfg["id"])
sub = {label: hkdf(master, repo_id, b"blkvault v1 " + label.encode())
       for label in ("data", "chunk-id", "map-id", "chunker", "config")}
ch, co = cfg["chunker"], cfg["compression"]
canonical = "".join(f"{k}={v}\n" for k, v in [
    ("format", cfg["format"]), ("version", cfg["version"]), ("id", cfg["id"]), ("created", cfg["created"]),
    ("encryption", cfg["encryption"]), ("chunker.kind", ch["kind"]), ("chunker.min", ch["min"]),
    ("chunker.avg", ch["avg"]), ("chunker.max", ch["max"]), ("compression.codec", co["codec"]),
    ("compression.level", co["level"]), ("pack_target", cfg["pack_target"])])
mac = hmac.new(sub["config"], ("blkvault-config-v1\n" + canonical).encode(), hashlib.sha256).hexdigest()
if mac != cfg["mac"]:
    sys.exit("keys.py: the derived master secret does not authenticate the config")
secrets = {"passphrase": passphrase, "kek": kek, "master": master, **sub}
if len(sys.argv) == 3:
    for label, k in secrets.items():
        print(label, k.hex())
    sys.exit(0)


def process_memory(pid):
    """The readable mappings of a process, in pieces; reservations over 64 GiB (the sanitizers'
    shadow memory, which holds no program data) are left out."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if "r" not in f[1] or hi - lo > (64 << 30) or f[-1] in ("[vvar]", "[vvar_vclock]"):
                continue
            for a in range(lo, hi, 16 << 20):
                try:
                    mem.seek(a)
                    yield mem.read(min(16 << 20, hi - a))
                except OSError:
                    pass


if sys.argv[3] == "--pid":
    import os, signal
    pid, absent = int(sys.argv[4]), sys.argv[5:]
    hits = dict.fromkeys(secrets, 0)
    os.kill(pid, signal.SIGSTOP)
    try:
        for buf in process_memory(pid):
            for label, k in secrets.items():
                hits[label] += buf.count(k)
    finally:
        os.kill(pid, signal.SIGCONT)
    print("occurrences in the memory of", pid, hits)
    found = {k: hits[k] for k in absent if hits[k]}
    if found:
        sys.exit(f"process {pid} still holds what it no longer needs (occurrences): {found}")
    sys.exit(0)
hits = dict.fromkeys(secrets, 0)
for core in sys.argv[3:]:
    tail = b""
    with open(core, "rb") as f:
        while block := f.read(16 << 20):
            buf = tail + block
            for label, k in secrets.items():
                hits[label] += buf.count(k)
            tail = buf[-63:]
found = {k: v for k, v in hits.items() if v}
if found:
    sys.exit(f"the core holds key material (occurrences): {found}")
