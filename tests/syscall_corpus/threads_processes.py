"""Threads, child processes, signals and timers, as programs use them."""
import asyncio
import concurrent.futures
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import jax.numpy as jnp

results = []
threads = [threading.Thread(target=lambda i=i: results.append(float(jnp.sum(jnp.arange(i + 1))))) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads", sorted(results))
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    print("pool", list(pool.map(lambda v: v * v, range(5))))
print(subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip())
print(subprocess.run("echo shell $((1 + 2)) | tr a-z A-Z", shell=True, capture_output=True, text=True).stdout.strip())
print(subprocess.run([sys.executable, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                     text=True).stdout.strip())
print(subprocess.check_output(["ls", "/tmp"], text=True).count("\n") >= 0)
pid = os.fork()
if pid == 0:
    os._exit(3)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
with multiprocessing.get_context("fork").Pool(2) as processes:
    print("multiprocessing", processes.map(abs, [-1, -2, 3]))
queue = multiprocessing.get_context("fork").Queue()
child = multiprocessing.get_context("fork").Process(target=queue.put, args=("from a child",))
child.start()
print(queue.get(timeout=30))
child.join()
fired = []
signal.signal(signal.SIGALRM, lambda *_: fired.append("alarm"))
signal.setitimer(signal.ITIMER_REAL, 0.05)
time.sleep(0.2)
signal.signal(signal.SIGUSR1, lambda *_: fired.append("usr1"))
os.kill(os.getpid(), signal.SIGUSR1)
print("signals", fired)


async def main():
    proc = await asyncio.create_subprocess_exec("/bin/echo", "async child", stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    await asyncio.sleep(0.01)
    return out.decode().strip()


print(asyncio.run(main()))
print("threading.Timer", threading.Timer(0.01, lambda: None).start() is None)
