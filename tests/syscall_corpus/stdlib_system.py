"""The standard library's system side: files, sockets a sandbox allows, time, randomness, limits."""
import ctypes
import fcntl
import gzip
import hashlib
import json
import locale
import mmap
import os
import platform
import random
import resource
import secrets
import select
import shutil
import socket
import sqlite3
import sys
import tempfile
import time
import uuid
import zipfile

os.makedirs("/tmp/work/sub", exist_ok=True)
with open("/tmp/work/a.txt", "w") as f:
    f.write("hello\n" * 100)
shutil.copy("/tmp/work/a.txt", "/tmp/work/b.txt")
shutil.copytree("/tmp/work/sub", "/tmp/work/sub2")
os.rename("/tmp/work/b.txt", "/tmp/work/c.txt")
os.symlink("/tmp/work/c.txt", "/tmp/work/link")
os.chmod("/tmp/work/c.txt", 0o600)
os.utime("/tmp/work/c.txt")
print(sorted(os.listdir("/tmp/work")), os.path.realpath("/tmp/work/link"), os.stat("/tmp/work/c.txt").st_size)
print([len(files) for _, _, files in os.walk("/tmp/work")], shutil.disk_usage("/tmp").total > 0)
print(os.statvfs("/tmp").f_bsize)
with tempfile.NamedTemporaryFile() as tmp, tempfile.TemporaryDirectory() as folder:
    tmp.write(b"x")
    tmp.flush()
    print("temp", os.path.exists(tmp.name), os.path.isdir(folder))
with gzip.open("/tmp/work/a.gz", "wt") as f:
    f.write("zipped")
with zipfile.ZipFile("/tmp/work/a.zip", "w") as z:
    z.write("/tmp/work/a.txt")
print(json.loads(json.dumps({"k": [1, 2]})), hashlib.sha256(b"x").hexdigest()[:8])
db = sqlite3.connect("/tmp/work/db.sqlite")
db.execute("create table t (v)")
db.execute("insert into t values (1)")
db.commit()
print("sqlite", db.execute("select count(*) from t").fetchone())
with open("/tmp/work/a.txt", "r+b") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    with mmap.mmap(f.fileno(), 0) as mapped:
        print("mmap", mapped[:5])
print(uuid.uuid4().version, secrets.token_hex(2).isalnum(), len(os.urandom(4)), random.SystemRandom().random() < 1)
print(len(os.getrandom(4)), time.time() > 0, time.monotonic() > 0, time.process_time() >= 0, os.times().user >= 0)
print(platform.uname().system, platform.python_version(), locale.getpreferredencoding(), os.cpu_count() > 0)
print(len(os.sched_getaffinity(0)) > 0, resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 0,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0, os.getloadavg()[0] >= 0)
print(os.getpid() > 0, os.getppid(), os.getuid(), os.getcwd(), sys.stdout.isatty(), shutil.get_terminal_size().columns)
left, right = socket.socketpair()
left.sendall(b"ping")
print("socketpair", right.recv(4))
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("/tmp/work/sock")
server.listen()
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect("/tmp/work/sock")
conn, _ = server.accept()
client.sendall(b"unix")
print("unix socket", conn.recv(4), select.select([conn], [], [], 0)[0] == [])
datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print("interfaces", [name for _, name in socket.if_nameindex()], socket.gethostname())
for family, address in [(socket.AF_INET, ("127.0.0.1", 9)), (socket.AF_INET6, ("::1", 9))]:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(1)
    try:
        sock.connect(address)
    except OSError as exc:
        print("no network", type(exc).__name__)
    finally:
        sock.close()
try:
    socket.getaddrinfo("example.com", 80)
except OSError as exc:
    print("no name service", type(exc).__name__)
poller = select.epoll()
read_end, write_end = os.pipe()
poller.register(read_end, select.EPOLLIN)
os.write(write_end, b"x")
print("epoll", poller.poll(1), select.poll() is not None)
libc = ctypes.CDLL(None)
print("ctypes", libc.getpid() == os.getpid(), ctypes.sizeof(ctypes.c_void_p))
print(open("/proc/self/status").read().count("\n") > 10, open("/proc/cpuinfo").read().count("processor") > 0)
print(open("/proc/meminfo").readline().split()[0], os.path.exists("/dev/shm"), os.access("/tmp", os.W_OK))
