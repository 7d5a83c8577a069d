#!/usr/bin/env python3
# Starts Paddle Serving (0.9.0's Python API) with the CTR model and sparse-parameter lookups
# in the cube. Written by terraform-provider-ctr into the serving ConfigMap and run as the
# serving container's command; see the ctr_serving documentation for the contract.
#
#   MODEL_URL  a .tar.gz of the serving model directory (the one holding
#              serving_server_conf.prototxt and the dense parameters), fetched at start.
#   CUBE_CONF  path of the cube.conf (ctr_cube's cube_conf), mounted from the ConfigMap.
#   --port=N   the port Serving listens on (the Service's and readiness probe's).
#   --enable_cube=true|false
#              true: reader -> GeneralDistKVInferOp (cube lookup + inference) -> response,
#              which makes Serving write cube.conf's place into resource.prototxt;
#              false: reader -> GeneralInferOp -> response, no cube.
#   --thread=N, --model_dir=DIR, --workdir=DIR  threads, where the model is unpacked, and
#              Serving's working directory for its generated configuration.
#
# Kept to Python 3.6 (the oldest Python of Paddle Serving's runtime images).
import argparse
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request

MODEL_CONF = "serving_server_conf.prototxt"


def fail(msg):
    sys.stderr.write("serve_ctr: " + msg + "\n")
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="serve_ctr", description="Paddle Serving with the CTR model and the cube")
    p.add_argument("--port", type=int, default=8010)
    p.add_argument("--enable_cube", default="true", choices=["true", "false"])
    p.add_argument("--thread", type=int, default=4)
    p.add_argument("--model_dir", default="/serving/model")
    p.add_argument("--workdir", default="/serving/workdir")
    args = p.parse_args(argv)
    if not 0 < args.port < 65536:
        p.error("--port must be between 1 and 65535")
    if args.thread < 1:
        p.error("--thread must be at least 1")
    return args


def safe_members(tar, dest):
    root = os.path.realpath(dest)
    for m in tar.getmembers():
        target = os.path.realpath(os.path.join(dest, m.name))
        if target != root and not target.startswith(root + os.sep):
            fail("the model archive has a member outside its directory: %r" % m.name)
        if m.issym() or m.islnk() or m.isdev():
            fail("the model archive has a link or device: %r" % m.name)
        yield m


def fetch_model(url, dest):
    """Downloads and unpacks the model archive into dest; returns the model directory."""
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    with tempfile.NamedTemporaryFile(suffix=".tar.gz") as tmp:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                shutil.copyfileobj(resp, tmp)
        except Exception as e:  # noqa: BLE001 - any failure to fetch ends the start
            fail("could not fetch MODEL_URL %s: %s" % (url, e))
        tmp.flush()
        try:
            with tarfile.open(tmp.name, "r:*") as tar:
                tar.extractall(dest, members=safe_members(tar, dest))
        except tarfile.TarError as e:
            fail("MODEL_URL %s is not a tar archive: %s" % (url, e))
    for here, _, files in sorted(os.walk(dest)):
        if MODEL_CONF in files:
            return here
    fail("MODEL_URL %s has no %s: it must hold a serving model directory" % (url, MODEL_CONF))


def ops(enable_cube):
    return ["GeneralReaderOp", "GeneralDistKVInferOp" if enable_cube else "GeneralInferOp", "GeneralResponseOp"]


def main(argv):
    args = parse_args(argv)
    enable_cube = args.enable_cube == "true"
    url = os.environ.get("MODEL_URL", "")
    if not url:
        fail("MODEL_URL is not set: set model_url on ctr_serving (a .tar.gz of the serving model directory)")
    cube_conf = os.environ.get("CUBE_CONF", "")
    if enable_cube and not os.path.isfile(cube_conf):
        fail("CUBE_CONF %r is not a file; --enable_cube=true needs cube.conf" % cube_conf)
    model = fetch_model(url, args.model_dir)

    from paddle_serving_server import OpMaker, OpSeqMaker, Server  # in the serving image

    maker, seq = OpMaker(), OpSeqMaker()
    for op in ops(enable_cube):
        seq.add_op(maker.create(op))
    server = Server()
    server.set_op_sequence(seq.get_op_sequence())
    server.set_num_threads(args.thread)
    server.load_model_config(model)
    os.makedirs(args.workdir, exist_ok=True)
    server.prepare_server(workdir=args.workdir, port=args.port, device="cpu",
                          cube_conf=cube_conf if enable_cube else None)
    sys.stdout.write("serve_ctr: serving %s on port %d (cube %s)\n" % (model, args.port, "on" if enable_cube else "off"))
    sys.stdout.flush()
    server.run_server()


if __name__ == "__main__":
    main(sys.argv[1:])
