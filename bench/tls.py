"""TLS on the forwarding path: mongotap and haproxy, each terminating TLS from the
load generator and originating TLS to the upstream, against both in plaintext;
interleaved rounds, one run. The upstream is the canned-reply server behind an
haproxy that terminates TLS (the same for every TLS target); certificates are made
by `openssl` for the run. Run through bench/tls.sh (it builds first).
Environment: ROUNDS (default 5), SECONDS per run (default 4).
"""
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy import REL, ROUNDS, SECONDS, cpu_seconds, free_port, start_haproxy as haproxy, wait_port  # noqa: E402


def certs(d):
    ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    open(os.path.join(d, "server.ext"), "w").write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    for cmd in [f"openssl req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca",
                f"openssl req {ec} -keyout server.key -out server.csr -subj /CN=localhost",
                "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt",
                "cat server.crt server.key > server.pem"]:
        subprocess.run(cmd, shell=True, cwd=d, check=True, capture_output=True)


def loadgen(port, conns, label, tls_ca):
    env = dict(os.environ)
    if tls_ca:
        env["LOADGEN_TLS_CA"] = tls_ca
    out = subprocess.run([os.path.join(REL, "loadgen"), f"127.0.0.1:{port}", str(conns), str(SECONDS), label],
                         capture_output=True, text=True, check=True, env=env).stdout.split("\t")
    return float(out[2]), int(out[3]), int(out[4])


def main():
    d = tempfile.mkdtemp()
    certs(d)
    ca, pem = os.path.join(d, "ca.pem"), os.path.join(d, "server.pem")
    procs = []
    try:
        canned = free_port()
        procs.append(subprocess.Popen([os.path.join(REL, "canned"), f"127.0.0.1:{canned}"]))
        wait_port(canned)
        tls_upstream = free_port()
        procs.append(haproxy(d, "tlsup", f"127.0.0.1:{tls_upstream} ssl crt {pem}", f"127.0.0.1:{canned}"))
        wait_port(tls_upstream)
        ports = {name: free_port() for name in ["haproxy", "haproxy-tls", "mongotap", "mongotap-tls"]}
        procs.append(haproxy(d, "plain", f"127.0.0.1:{ports['haproxy']}", f"127.0.0.1:{canned}"))
        procs.append(haproxy(d, "tls", f"127.0.0.1:{ports['haproxy-tls']} ssl crt {pem}",
                             f"127.0.0.1:{tls_upstream} ssl verify required ca-file {ca} sni str(localhost)"))
        mt = lambda port, upstream, extra: subprocess.Popen(  # noqa: E731
            [os.path.join(REL, "mongotap"), "proxy", "--listen", f"127.0.0.1:{port}", "--upstream", upstream,
             "--admin", "off", "--no-side-connection"] + extra, stderr=subprocess.DEVNULL)
        procs.append(mt(ports["mongotap"], f"127.0.0.1:{canned}", []))
        procs.append(mt(ports["mongotap-tls"], f"mongodb://localhost:{tls_upstream}/?tls=true&tlsCAFile={ca}",
                        ["--tls-certificate-key-file", pem]))
        pids = {"haproxy": procs[2].pid, "haproxy-tls": procs[3].pid, "mongotap": procs[4].pid, "mongotap-tls": procs[5].pid}
        for p in ports.values():
            wait_port(p)
        targets = [(n, ports[n], ca if n.endswith("-tls") else None) for n in ["haproxy", "mongotap", "haproxy-tls", "mongotap-tls"]]
        results, cpu, ops32 = {}, {}, {}
        for r in range(ROUNDS):
            order = targets[r % 4:] + targets[:r % 4]
            for conns in (1, 32):
                for name, port, tls in order:
                    before = cpu_seconds(pids[name]) if conns == 32 else None
                    results.setdefault((name, conns), []).append(loadgen(port, conns, name, tls))
                    if before is not None:
                        after = cpu_seconds(pids[name])
                        cpu[name] = cpu.get(name, 0.0) + sum(after.values()) - sum(before.values())
                        ops32[name] = ops32.get(name, 0.0) + results[(name, 32)][-1][0] * SECONDS
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in results.items()}
    print(f"TLS benchmark: {ROUNDS} interleaved rounds of {SECONDS:g} s per target; medians; upstream = canned-reply "
          f"server (behind an haproxy terminating TLS for the TLS targets); {os.cpu_count()} cores")
    print(f"{'target':<14}{'conns':>6}{'ops/s':>10}{'p50 us':>9}{'p99 us':>9}{'CPU us/op':>11}")
    for conns in (1, 32):
        for name, _, _ in targets:
            ops, p50, p99 = med[(name, conns)]
            per_op = f"{cpu[name] / ops32[name] * 1e6:.1f}" if conns == 32 else ""
            print(f"{name:<14}{conns:>6}{ops:>10.0f}{p50:>9.0f}{p99:>9.0f}{per_op:>11}")
    m, h = med[("mongotap-tls", 32)][0], med[("haproxy-tls", 32)][0]
    print(f"TLS to TLS at 32 connections: mongotap / haproxy = {m / h:.2f}; mongotap TLS / plaintext = "
          f"{m / med[('mongotap', 32)][0]:.2f} (haproxy: {h / med[('haproxy', 32)][0]:.2f})")
    print(f"added p50 at 1 connection, TLS to TLS: mongotap {med[('mongotap-tls', 1)][1]:.0f} us, "
          f"haproxy {med[('haproxy-tls', 1)][1]:.0f} us; CPU per operation at 32: mongotap "
          f"{cpu['mongotap-tls'] / ops32['mongotap-tls'] * 1e6:.1f} us, haproxy {cpu['haproxy-tls'] / ops32['haproxy-tls'] * 1e6:.1f} us")


if __name__ == "__main__":
    sys.exit(main())
