# SPDX-License-Identifier: MIT
"""How tests/integration/test_apps.py and bench/apps.py start the servers of
issue 25's matrix: command lines and configuration files, one function each,
so that the test and the benchmark run the same configurations. Functions
that write a file write it into the scratch directory tmp and return its
path."""
import os
import pwd


def postgres_cmd(bindir, data, tmp, port):
    """PostgreSQL on 127.0.0.1:port (its Unix socket in tmp), durability off"""
    return [os.path.join(bindir, "postgres"), "-D", data, "-k", tmp, "-p", str(port),
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off", "-c", "max_connections=50", "-c", "ssl=off"]


def pgbouncer_ini(tmp, port, pg_port, pool=4):
    """pgbouncer on 127.0.0.1:port in front of the database postgres on
    pg_port: transaction pooling, trust. tcp_defer_accept is left at its
    default, which on Linux is on (45 s): pgbouncer's listener has
    TCP_DEFER_ACCEPT, as users get it."""
    with open(os.path.join(tmp, "userlist.txt"), "w") as f:
        f.write('"postgres" ""\n')
    path = os.path.join(tmp, "pgbouncer.ini")
    with open(path, "w") as f:
        f.write(f"""[databases]
postgres = host=127.0.0.1 port={pg_port} dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {tmp}/userlist.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = {pool}
logfile = {tmp}/pgbouncer.log
pidfile = {tmp}/pgbouncer.pid
""")
    return path


def nginx_conf(tmp, port, root, listen_opts="", workers=1):
    """nginx serving root on 127.0.0.1:port (listen_opts: "deferred" for
    TCP_DEFER_ACCEPT), its logs and temporary files in tmp"""
    # as root, workers must keep the clients' user to reach the run directory
    user = ("user %s;" % pwd.getpwuid(os.getuid()).pw_name) if os.getuid() == 0 else ""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(f"""
daemon off;
master_process on;
worker_processes {workers};
{user}
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    types {{ text/html html; application/octet-stream bin; }}
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port} {listen_opts};
        root {root};
        location / {{ }}
    }}
}}
""")
    return path


def haproxy_cfg(tmp, port, backend_port, splice=True):
    """HAProxy in HTTP mode on 127.0.0.1:port in front of one server on
    backend_port, keep-alive both sides; with splice, request and response
    bodies move through a pipe with splice() rather than its buffers"""
    opts = "    option splice-request\n    option splice-response\n" if splice else ""
    path = os.path.join(tmp, "haproxy.cfg")
    with open(path, "w") as f:
        f.write(f"""global
    maxconn 1000

defaults
    mode http
    timeout connect 5s
    timeout client 15s
    timeout server 15s
    option http-keep-alive
{opts}
frontend fe
    bind 127.0.0.1:{port}
    default_backend be

backend be
    server s1 127.0.0.1:{backend_port}
""")
    return path


def mariadb_install_args(data):
    """mariadb-install-db's arguments for a data directory of our own"""
    args = ["--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal",
            "--skip-test-db", "--innodb-log-file-size=8M"]
    if os.getuid() == 0:
        args.append("--user=root")
    return args


def mariadb_args(data, tmp, port, native_aio):
    """mariadbd on 127.0.0.1:port, no grant checks, durability off; its log
    on stderr. native_aio: InnoDB's asynchronous I/O, on io_uring in a build
    with liburing (Debian's), else libaio; off: InnoDB's own threads"""
    args = ["--no-defaults", "--datadir=" + data, "--socket=" + os.path.join(tmp, "mysqld.sock"),
            "--pid-file=" + os.path.join(tmp, "mysqld.pid"), "--port=%d" % port,
            "--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=8M",
            "--innodb-flush-log-at-trx-commit=0", "--performance-schema=off", "--max-connections=200",
            "--innodb-use-native-aio=%d" % (1 if native_aio else 0)]
    if os.getuid() == 0:
        args.append("--user=root")
    return args
