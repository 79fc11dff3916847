"""``rlvitals serve DIR_OR_RUNS...``: the live dashboard in a browser, and /metrics."""

from __future__ import annotations

import argparse
import sys

from ._options import (
    add_judge_args,
    add_output_args,
    add_source_args,
    judge_of,
    outputs_of,
    source_of,
    throttle_of,
)

HELP = "serve a live dashboard of runs (updates as steps land; /metrics for Prometheus)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help=HELP,
        description="Serve a live dashboard for every run under the given folders (new runs "
        "appear as they start) and for runs given directly: the same plots, findings and "
        "transcripts as the report, updated as steps land (server-sent events), and /metrics "
        "in Prometheus text format. Each new finding of any run is posted once to --webhook "
        "and handed to each --to output, as `rlvitals watch` does. Binds 127.0.0.1 unless "
        "--host says otherwise; serves only the runs it was given.",
    )
    p.add_argument(
        "paths", nargs="+", metavar="DIR_OR_RUN", help="run directories, log files, or folders"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; 0.0.0.0 shows your runs to the network)",
    )
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (a reverse proxy's or a DNS alias; "
        "repeatable; '*': any). Requests under other names are refused, so a web page "
        "elsewhere cannot point its own name at this server (DNS rebinding)",
    )
    p.add_argument(
        "--poll",
        dest="poll_s",
        type=float,
        default=0.1,
        metavar="SECONDS",
        help="how often to look for new records (default 0.1)",
    )
    p.add_argument(
        "--follow-links",
        action="store_true",
        help="also serve runs and transcript files that symbolic links in the folders point "
        "to outside them (default: only real paths inside the given folders)",
    )
    p.add_argument("--verbose", action="store_true", help="log every request")
    add_judge_args(
        p,
        baseline="healthy ranges from `rlvitals baseline`: judged against and shaded",
        stall_after="a running run with no step record or progress for this long is stalled",
    )
    add_output_args(p)
    add_source_args(p, samples=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..follow.hub import Hub, serve
    from ..outputs import describe
    from ..views.dashboard import baseline_ranges
    from ..views.server import _is_loopback  # the serve extra, or one error line now

    judge = judge_of(args)
    baseline = judge.baseline
    outputs = outputs_of(args)
    shading = baseline_ranges(baseline, args.baseline) if baseline else None

    def ready(url: str, hub: Hub) -> None:
        print(f"rlvitals: serving {len(hub.runs)} run(s) at {url}  (metrics: {url}metrics)")
        if hub.roots:
            print("  watching for new runs under: " + ", ".join(map(str, hub.roots)))
        if not _is_loopback(args.host):
            print(
                f"  warning: listening on {args.host}: anyone who can reach this machine can "
                "read these runs, transcripts included",
                file=sys.stderr,
            )
        for out in outputs:
            print(f"  new findings to: {describe(out)}")
        print("  Ctrl-C to stop", flush=True)

    try:
        lost = serve(
            args.paths,
            args.host,
            args.port,
            verbose=args.verbose,
            on_ready=ready,
            allowed_hosts=args.allow_host,
            page={"baseline": shading, "stall_after": judge.stall_after},
            source=source_of(args, ""),
            judge=judge,
            outputs=outputs,
            throttle=throttle_of(args, Hub.THROTTLE),
            min_alert=args.alert_on,
            follow_links=args.follow_links,
        )
    except BaseException:
        for out in outputs:
            out.close(0)
        raise
    if lost:
        print(f"rlvitals serve: {lost} alert(s) not delivered", file=sys.stderr)
    return 0
