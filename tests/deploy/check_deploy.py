#!/usr/bin/env python3
"""Checks the meaning of the deployment files (called by check_deploy.sh).

docker-compose.yml (as `docker-compose config` resolved it, with defaults and with overrides),
the Dockerfile's two stages against scripts/install-deps.sh and the built binaries, and
.dockerignore. Prints one line per failure and exits 1 if there is any.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
from urllib.parse import urlsplit, unquote

import yaml

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL: {message}", file=sys.stderr)


def expect(condition, message):
    if not condition:
        fail(message)
    return condition


# ---------------------------------------------------------------------------------------------
# Known settings: every WALLET_* name the server reads, from the generated example file.

def known_settings(source):
    with open(os.path.join(source, "config", "wallet.example.toml"), encoding="utf-8") as f:
        names = set(re.findall(r"\((WALLET_[A-Z0-9_]+)", f.read()))
    expect(len(names) > 20, f"config/wallet.example.toml names only {len(names)} WALLET_* variables")
    return names


# ---------------------------------------------------------------------------------------------
# docker-compose.yml

def check_compose(path_defaults, path_overridden, source, settings):
    with open(path_defaults, encoding="utf-8") as f:
        defaults = yaml.safe_load(f)
    with open(path_overridden, encoding="utf-8") as f:
        overridden = yaml.safe_load(f)
    if not expect(isinstance(defaults, dict) and isinstance(overridden, dict), "compose: docker-compose config printed nothing"):
        return
    services = defaults.get("services", {})
    for name in ("postgres", "redis", "wallet"):
        if not expect(name in services, f"compose: no service '{name}'"):
            return
    pg, redis, wallet = services["postgres"], services["redis"], services["wallet"]

    expect(str(pg.get("image", "")).startswith("postgres:15"), f"compose: postgres image is {pg.get('image')}, not postgres:15")
    expect(str(redis.get("image", "")).startswith("redis:7"), f"compose: redis image is {redis.get('image')}, not redis:7")
    for name, svc in services.items():
        test = (svc.get("healthcheck") or {}).get("test")
        expect(bool(test) and test != ["NONE"], f"compose: service '{name}' has no health check")

    build = wallet.get("build") or {}
    context = build.get("context") if isinstance(build, dict) else build
    expect(context is not None and os.path.realpath(context) == os.path.realpath(source),
           f"compose: wallet is not built from the repository root (build context {context})")
    depends = wallet.get("depends_on") or {}
    for dep in ("postgres", "redis"):
        condition = (depends.get(dep) or {}).get("condition") if isinstance(depends, dict) else None
        expect(condition == "service_healthy", f"compose: wallet does not wait for {dep} to be healthy ({condition})")

    health = " ".join((wallet.get("healthcheck") or {}).get("test") or [])
    expect("/healthz" in health and ":8080" in health, f"compose: wallet health check does not probe :8080/healthz ({health})")
    ports = wallet.get("ports") or []
    expect(any((p.get("target") if isinstance(p, dict) else str(p).split(":")[-1]) in (8080, "8080") for p in ports),
           "compose: wallet does not publish container port 8080")

    mounts = [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}" for v in pg.get("volumes") or []]
    expect(any(m.split(":")[0].endswith("docker/initdb") and ":/docker-entrypoint-initdb.d" in m for m in mounts),
           "compose: postgres does not mount docker/initdb at /docker-entrypoint-initdb.d")

    env = wallet.get("environment") or {}
    for name in env:
        if name.startswith("WALLET_"):
            expect(name in settings, f"compose: {name} is not a setting the server knows (config/wallet.example.toml)")
    required = ["WALLET_DATABASE_URL", "WALLET_DATABASE_OWNER_URL", "WALLET_REDIS_URL", "WALLET_HTTP_HOST",
                "WALLET_HTTP_PORT", "WALLET_AUTH_BOOTSTRAP_KEY"]
    for name in required:
        expect(name in env, f"compose: wallet lacks {name}")
    if any(name not in env for name in required):
        return
    expect(env["WALLET_HTTP_HOST"] == "0.0.0.0", f"compose: WALLET_HTTP_HOST is {env['WALLET_HTTP_HOST']}, not 0.0.0.0")
    expect(str(env["WALLET_HTTP_PORT"]) == "8080", f"compose: WALLET_HTTP_PORT is {env['WALLET_HTTP_PORT']}, not 8080")
    expect(env["WALLET_REDIS_URL"] == "redis://redis:6379", f"compose: WALLET_REDIS_URL is {env['WALLET_REDIS_URL']}")
    expect(bool(env["WALLET_AUTH_BOOTSTRAP_KEY"]), "compose: WALLET_AUTH_BOOTSTRAP_KEY has no placeholder default")

    pg_env = pg.get("environment") or {}
    expect(bool(pg_env.get("POSTGRES_PASSWORD")), "compose: postgres has no POSTGRES_PASSWORD")

    def check_url(name, user, password_var, doc):
        url = urlsplit(doc["services"]["wallet"]["environment"][name])
        pg_doc_env = doc["services"]["postgres"].get("environment") or {}
        expect(url.scheme in ("postgresql", "postgres"), f"compose: {name} is not a PostgreSQL URL")
        expect(url.username == user, f"compose: {name} connects as {url.username}, not {user}")
        expect(url.hostname == "postgres" and url.path == "/wallet", f"compose: {name} does not name postgres/wallet")
        expect(unquote(url.password or "") == pg_doc_env.get(password_var),
               f"compose: the password in {name} is not the {password_var} given to the postgres container")
        return unquote(url.password or "")

    app_default = check_url("WALLET_DATABASE_URL", "wallet_app", "WALLET_APP_PASSWORD", defaults)
    owner_default = check_url("WALLET_DATABASE_OWNER_URL", "wallet_owner", "WALLET_OWNER_PASSWORD", defaults)
    expect(bool(app_default) and bool(owner_default), "compose: the database roles have no default passwords")

    # The overrides reach both the server and the database, and the bootstrap key comes from the environment.
    o_env = overridden["services"]["wallet"]["environment"]
    expect(o_env.get("WALLET_AUTH_BOOTSTRAP_KEY") == "key-from-the-environment",
           "compose: WALLET_AUTH_BOOTSTRAP_KEY from the environment does not reach the server")
    expect(check_url("WALLET_DATABASE_URL", "wallet_app", "WALLET_APP_PASSWORD", overridden) == "app-secret",
           "compose: WALLET_APP_PASSWORD from the environment does not reach the server")
    expect(check_url("WALLET_DATABASE_OWNER_URL", "wallet_owner", "WALLET_OWNER_PASSWORD", overridden) == "owner-secret",
           "compose: WALLET_OWNER_PASSWORD from the environment does not reach the server")


# ---------------------------------------------------------------------------------------------
# Dockerfile

def dockerfile_instructions(path):
    """(instruction, arguments) pairs, with continuation lines joined and comments dropped."""
    out, pending = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line = pending + line
            pending = ""
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages(instructions):
    result = []
    for word, args in instructions:
        if word == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) >= 3 and parts[1].lower() == "as" else None
            result.append({"image": parts[0], "name": name, "body": []})
        elif result:
            result[-1]["body"].append((word, args))
    return result


def apt_installs(stage):
    packages = []
    for word, args in stage["body"]:
        if word != "RUN":
            continue
        for command in re.split(r"&&|;|\|\|", args):
            tokens = shlex.split(command)
            if "apt-get" in tokens and "install" in tokens:
                for token in tokens[tokens.index("install") + 1:]:
                    if not token.startswith("-"):
                        packages.append(token)
    return packages


def install_deps_packages(source):
    with open(os.path.join(source, "scripts", "install-deps.sh"), encoding="utf-8") as f:
        text = f.read()
    match = re.search(r"packages=\((.*?)\)", text, re.S)
    if not expect(match is not None, "scripts/install-deps.sh has no packages=( ... ) list"):
        return []
    return shlex.split(match.group(1), comments=True)


def apt_known(packages):
    """The subset of `packages` that apt can install or has installed (one apt-cache call)."""
    out = subprocess.run(["apt-cache", "policy", *packages], capture_output=True, text=True).stdout
    known, current = set(), None
    for line in out.splitlines():
        header = re.match(r"^(\S+):$", line)
        if header:
            current = header.group(1)
            continue
        version = re.match(r"^\s+(Installed|Candidate): (.+)$", line)
        if current and version and version.group(2).strip() != "(none)":
            known.add(current)
    return known


def linked_packages(binary):
    """Debian packages owning the shared libraries a binary names directly (DT_NEEDED)."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                        subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout)
    resolved = {}
    for line in subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            resolved[m.group(1)] = m.group(2)
    owners = {}
    for lib in needed:
        path = resolved.get(lib)
        if not expect(path is not None and path != "not", f"{binary}: {lib} does not resolve on this machine"):
            continue
        found = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
        if found.returncode != 0:
            found = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
        if expect(found.returncode == 0, f"{binary}: no Debian package owns {path}"):
            owners[lib] = found.stdout.split(":")[0].strip()
    return owners


# Packages every debian:bookworm-slim image already has.
BASE_IMAGE_PACKAGES = {"libc6", "libstdc++6", "libgcc-s1"}
BUILD_TOOLS = {"build-essential", "cmake", "ninja-build", "pkg-config"}
RUNTIME_LIBRARIES = ["libcaf-core0.17", "libcaf-io0.17", "libpqxx-6.4", "libhiredis0.14", "libspdlog1.10", "libfmt9",
                     "libboost-json1.81.0", "libssl3", "libjemalloc2"]


def check_dockerfile(source, build):
    all_stages = stages(dockerfile_instructions(os.path.join(source, "Dockerfile")))
    if not expect(len(all_stages) >= 2, "Dockerfile: not a multi-stage build"):
        return
    build_stage, runtime = all_stages[0], all_stages[-1]
    for stage in (build_stage, runtime):
        expect(stage["image"].startswith("debian:bookworm"), f"Dockerfile: stage from {stage['image']}, not Debian bookworm")
    expect(build_stage["name"] is not None, "Dockerfile: the build stage has no name")

    build_packages = apt_installs(build_stage)
    runtime_packages = apt_installs(runtime)
    wanted = install_deps_packages(source)
    dev = [p for p in wanted if p.endswith("-dev")]
    expect(len(dev) >= 10, f"scripts/install-deps.sh lists only {len(dev)} -dev packages")
    for p in dev:
        expect(p in build_packages, f"Dockerfile: the build stage does not install {p} (scripts/install-deps.sh does)")
    for p in BUILD_TOOLS & set(wanted):
        expect(p in build_packages, f"Dockerfile: the build stage does not install {p}")
    for p in runtime_packages:
        expect(not p.endswith("-dev"), f"Dockerfile: the runtime stage installs the development package {p}")
    for p in RUNTIME_LIBRARIES:
        expect(p in runtime_packages, f"Dockerfile: the runtime stage does not install {p}")
    named = sorted(set(build_packages + runtime_packages))
    known = apt_known(named)
    for p in named:
        expect(p in known, f"Dockerfile: apt does not know the package {p}")

    body = build_stage["body"]
    runs = " ".join(args for word, args in body if word == "RUN")
    expect("-DCMAKE_BUILD_TYPE=Release" in runs, "Dockerfile: the build stage does not build Release")
    expect("-G Ninja" in runs, "Dockerfile: the build stage does not use Ninja")
    build_dir = re.search(r"-B\s+(\S+)", runs)
    for target, subdir in (("wallet-server", "tools/server"), ("wallet-admin", "tools/admin")):
        expect(re.search(rf"\b{target}\b", runs.split("ninja", 1)[-1]) is not None,
               f"Dockerfile: the build stage does not build {target}")
        expect(os.path.isfile(os.path.join(source, subdir, "CMakeLists.txt")), f"no {subdir}/CMakeLists.txt in the source")
        if build_dir:
            binary = f"{build_dir.group(1)}/{subdir}/{target}"
            expect(any(w == "COPY" and f"--from={build_stage['name']}" in a and binary in a for w, a in runtime["body"]),
                   f"Dockerfile: the runtime stage does not copy {binary} from the build stage")

    words = [w for w, _ in runtime["body"]]
    users = [a for w, a in runtime["body"] if w == "USER"]
    expect(bool(users) and users[-1].split(":")[0] not in ("root", "0"), "Dockerfile: the runtime stage runs as root")
    expect(any(w == "EXPOSE" and "8080" in a.split() for w, a in runtime["body"]), "Dockerfile: no EXPOSE 8080")
    expect(any(w == "HEALTHCHECK" and "/healthz" in a for w, a in runtime["body"]), "Dockerfile: no HEALTHCHECK on /healthz")
    health = " ".join(a for w, a in runtime["body"] if w == "HEALTHCHECK")
    if "curl" in health:
        expect("curl" in runtime_packages, "Dockerfile: the health check uses curl, which the runtime stage lacks")
    expect(any(w in ("ENTRYPOINT", "CMD") and "wallet-server" in a for w, a in runtime["body"]),
           "Dockerfile: the image does not run wallet-server")
    expect("ENV" in words and any("WALLET_HTTP_HOST=0.0.0.0" in a for w, a in runtime["body"] if w == "ENV"),
           "Dockerfile: the server does not listen on 0.0.0.0 by default")

    # What the binaries link against must be installed at run time (checked when they are built).
    for target, subdir in (("wallet-server", "tools/server"), ("wallet-admin", "tools/admin")):
        binary = os.path.join(build, subdir, target) if build else ""
        if not binary or not os.path.isfile(binary):
            print(f"note: {target} is not built in '{build}'; its linkage is not checked")
            continue
        for lib, package in sorted(linked_packages(binary).items()):
            expect(package in runtime_packages or package in BASE_IMAGE_PACKAGES,
                   f"Dockerfile: {target} links {lib} from {package}, which the runtime stage does not install")


def check_dockerignore(source):
    path = os.path.join(source, ".dockerignore")
    if not expect(os.path.isfile(path), "no .dockerignore"):
        return
    with open(path, encoding="utf-8") as f:
        patterns = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    for needed in (".git", "var/", "build*/"):
        expect(needed in patterns, f".dockerignore does not exclude {needed}")


def check_initdb(source):
    path = os.path.join(source, "docker", "initdb", "01-roles.sql")
    if not expect(os.path.isfile(path), "no docker/initdb/01-roles.sql"):
        return
    with open(path, encoding="utf-8") as f:
        sql = f.read()
    for pattern, what in ((r"CREATE ROLE wallet_owner LOGIN", "the wallet_owner role"),
                          (r"CREATE ROLE wallet_app LOGIN", "the wallet_app role"),
                          (r"CREATE DATABASE wallet OWNER wallet_owner", "the wallet database owned by wallet_owner")):
        expect(re.search(pattern, sql) is not None, f"01-roles.sql does not create {what}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--build", default="")
    parser.add_argument("--compose-defaults", required=True)
    parser.add_argument("--compose-overridden", required=True)
    args = parser.parse_args()
    settings = known_settings(args.source)
    check_compose(args.compose_defaults, args.compose_overridden, args.source, settings)
    check_dockerfile(args.source, args.build)
    check_dockerignore(args.source)
    check_initdb(args.source)
    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("compose, Dockerfile, .dockerignore and init script: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
