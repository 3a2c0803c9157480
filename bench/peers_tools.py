# SPDX-License-Identifier: LGPL-2.1-or-later
"""The tools bench/peers runs: how each one inits a repository, backs up, restores, and which
settings make them comparable (64 KiB average chunks where settable, zstd level 3, encryption
on where the tool has it). Each method returns (argv, cwd); bench/peers times it."""
import json
import os
import shutil
import subprocess

PASSWORD = "bench-passphrase"
BORG_CHUNKER = "buzhash,14,18,16,4095"   # 16 KiB min, 64 KiB average, 256 KiB max


def first_line(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


class Tool:
    name = "?"
    dir_source = True        # can back up a directory (the dedup tests back up the parts at once)
    sparse_restore = True    # has a sparse restore mode
    plain_restore = True     # has a plain (zeroes written) restore mode
    unique_names = False     # snapshot names must differ (the unchanged image is named v3-again)
    settings = ""

    def __init__(self, exe, work):
        self.exe = exe
        self.work = work     # private scratch directory (caches, configs)

    def env(self):
        return {}

    def version(self):
        return first_line([self.exe, "--version"])

    def init(self, repo):
        """The commands (argv lists) that create an empty repository, untimed."""
        raise NotImplementedError

    def backup(self, repo, stage, fname, name):
        """Back up stage/fname (a file) or, with fname None, the directory stage."""
        raise NotImplementedError

    def restore(self, repo, name, out, sparse):
        """Restore snapshot name into directory out; the restored file is found by find."""
        raise NotImplementedError

    def reset(self):
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work, exist_ok=True)


class Blkvault(Tool):
    name = "blkvault"
    dir_source = False
    plain_restore = False
    settings = "hybrid chunker 16K:64K:256K, zstd 3, AES-256-GCM (key file), all cores"

    def __init__(self, exe, work, key):
        super().__init__(exe, work)
        self.key = key

    def version(self):
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        rev = first_line(["git", "-C", src, "rev-parse", "--short", "HEAD"])
        return f"git {rev}"

    def init(self, repo):
        return [[self.exe, "init", repo, f"--key-file={self.key}"]]

    def backup(self, repo, stage, fname, name):
        return [self.exe, "backup", repo, os.path.join(stage, fname), f"--name={name}", "-q",
                f"--key-file={self.key}"], None

    def restore(self, repo, name, out, sparse):
        return [self.exe, "restore", repo, f"{name}@latest", os.path.join(out, "disk.img"), "-q",
                f"--key-file={self.key}"], None


class Borg(Tool):
    name = "borg"
    unique_names = True   # borg 1.2 refuses a second archive of the same name
    settings = f"repokey (AES-CTR + HMAC-SHA256), zstd,3, --chunker-params {BORG_CHUNKER}, one thread"

    def env(self):
        return {"BORG_PASSPHRASE": PASSWORD, "BORG_BASE_DIR": self.work,
                "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes"}

    def init(self, repo):
        return [[self.exe, "init", "-e", "repokey", repo]]

    def backup(self, repo, stage, fname, name):
        return [self.exe, "create", "--compression", "zstd,3", "--chunker-params", BORG_CHUNKER,
                f"{repo}::{name}", fname or "."], stage

    def restore(self, repo, name, out, sparse):
        return [self.exe, "extract"] + (["--sparse"] if sparse else []) + [f"{repo}::{name}"], out


class Borg2(Borg):
    unique_names = False
    name = "borg2"
    settings = f"-e aes256-ocb (key in the repository), zstd,3, --chunker-params {BORG_CHUNKER}, one thread"

    def init(self, repo):
        return [[self.exe, "-r", repo, "repo-create", "-e", "aes256-ocb"]]

    def backup(self, repo, stage, fname, name):
        return [self.exe, "-r", repo, "create", "--compression", "zstd,3", "--chunker-params",
                BORG_CHUNKER, name, fname or "."], stage

    def restore(self, repo, name, out, sparse):
        return [self.exe, "-r", repo, "extract"] + (["--sparse"] if sparse else []) + [name], out


class Restic(Tool):
    name = "restic"
    settings = "repository v2, RESTIC_COMPRESSION=auto (zstd default level), AES-256-CTR + Poly1305, own chunker (~1 MiB average, not settable)"

    def env(self):
        return {"RESTIC_PASSWORD": PASSWORD, "RESTIC_CACHE_DIR": self.work,
                "RESTIC_COMPRESSION": "auto", "RESTIC_PROGRESS_FPS": "0.0001"}

    def version(self):
        return " ".join(first_line([self.exe, "version"]).split()[:2])

    def init(self, repo):
        return [[self.exe, "-q", "-r", repo, "init"]]

    def backup(self, repo, stage, fname, name):
        return [self.exe, "-q", "-r", repo, "backup", "--tag", name, fname or "."], stage

    def restore(self, repo, name, out, sparse):
        return [self.exe, "-q", "-r", repo, "restore", "latest", "--target", out] + \
            (["--sparse"] if sparse else []), None


class ResticDebian(Restic):
    name = "restic-debian"
    sparse_restore = False   # restic 0.14 has no --sparse


class Kopia(Tool):
    name = "kopia"
    settings = "filesystem repository, splitter DYNAMIC-1M-BUZHASH (its smallest content-defined one: 64 KiB is not settable), zstd (policy), AES256-GCM-HMAC-SHA256"
    splitter = "DYNAMIC-1M-BUZHASH"

    def version(self):   # "v0.21.1 build: ..."
        return "kopia " + first_line([self.exe, "--version"]).split()[0]

    def base(self):
        return [self.exe, f"--config-file={self.work}/kopia.config", "--no-progress"]

    def env(self):
        return {"KOPIA_PASSWORD": PASSWORD, "KOPIA_CHECK_FOR_UPDATES": "false",
                "KOPIA_LOG_DIR": f"{self.work}/logs", "KOPIA_CACHE_DIRECTORY": f"{self.work}/cache"}

    def init(self, repo):
        create = self.base() + ["repository", "create", "filesystem", f"--path={repo}",
                                f"--object-splitter={self.splitter}"]
        return [create, self.base() + ["policy", "set", "--global", "--compression=zstd"]]

    def backup(self, repo, stage, fname, name):
        # kopia snapshots directories: the stage holds only the file under test
        return self.base() + ["snapshot", "create", stage, f"--description={name}"], None

    def restore(self, repo, name, out, sparse):
        snaps = json.loads(subprocess.run(self.base() + ["snapshot", "list", "--all", "--json"],
                                          capture_output=True, text=True, env=self.full_env(),
                                          check=True).stdout)
        sid = [s["id"] for s in snaps if s.get("description") == name][-1]
        return self.base() + ["snapshot", "restore", sid, out] + \
            (["--write-sparse-files"] if sparse else []), None

    def full_env(self):
        e = dict(os.environ)
        e.update(self.env())
        return e


class Desync(Tool):
    name = "desync"
    dir_source = False
    settings = "casync format, -m 16:64:256 (KiB), zstd (chunk store default), no encryption"

    sparse_restore = False   # no sparse mode in desync extract

    def version(self):   # desync has no --version: peers-install.sh names the binary after it
        return "desync " + os.path.basename(self.exe).split("-", 1)[-1]

    def init(self, repo):
        return [["mkdir", "-p", f"{repo}/store", f"{repo}/idx"]]

    def backup(self, repo, stage, fname, name):
        return [self.exe, "make", "-s", f"{repo}/store", "-m", "16:64:256",
                f"{repo}/idx/{name}.caibx", os.path.join(stage, fname)], None

    def restore(self, repo, name, out, sparse):
        return [self.exe, "extract", "-s", f"{repo}/store", f"{repo}/idx/{name}.caibx",
                os.path.join(out, "disk.img")], None


class Casync(Tool):
    name = "casync"
    dir_source = False
    settings = "blob index, --chunk-size=16K:64K:256K, --compression=zstd (casync's level), no encryption, one thread"

    def init(self, repo):
        return [["mkdir", "-p", f"{repo}/store", f"{repo}/idx"]]

    def backup(self, repo, stage, fname, name):
        return [self.exe, "make", f"--store={repo}/store", "--chunk-size=16K:64K:256K",
                "--compression=zstd", f"{repo}/idx/{name}.caibx", os.path.join(stage, fname)], None

    def restore(self, repo, name, out, sparse):
        return [self.exe, "extract", f"--store={repo}/store", "--seed-output=no",
                f"--punch-holes={'yes' if sparse else 'no'}", f"{repo}/idx/{name}.caibx",
                os.path.join(out, "disk.img")], None


# name -> (class, where the executable comes from: "debian" path or "cache" peer name)
ALL = {
    "blkvault": (Blkvault, None),
    "borg": (Borg, "/usr/bin/borg"),
    "borg2": (Borg2, "cache"),
    "restic": (Restic, "cache"),
    "restic-debian": (ResticDebian, "/usr/bin/restic"),
    "kopia": (Kopia, "cache"),
    "desync": (Desync, "cache"),
    "casync": (Casync, "/usr/bin/casync"),
}
ORDER = ["blkvault", "borg", "borg2", "restic", "restic-debian", "kopia", "desync", "casync"]
