package loadgen

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// DaemonLoad is a load run against one daemon, as execload and preflightload make it: the flags
// they share, a temporary directory holding the binaries, the daemon's config and its log, the
// daemon itself, and the load with the CPU it cost.
type DaemonLoad struct {
	N, Clients int
	Dir        string // the run's temporary directory, set by Main

	tool, daemon                      string // the command's name, and the daemon's binary
	cpuprofile, gogc, debugAddr, base string
	profsec                           int
	keep, tracing                     bool
	d                                 *Daemon
	stops                             []func() // run by Main, the last added first
}

// NewDaemonLoad registers the flags of tool, which loads daemon (its binary's name; desc names
// it in -cpuprofile's usage); nUsage is -n's usage.
func NewDaemonLoad(tool, daemon, desc, nUsage string) *DaemonLoad {
	l := &DaemonLoad{tool: tool, daemon: daemon}
	flag.IntVar(&l.N, "n", 20000, nUsage)
	flag.IntVar(&l.Clients, "c", 32, "concurrent clients")
	flag.BoolVar(&l.keep, "keep", false, "keep the temporary directory")
	flag.StringVar(&l.cpuprofile, "cpuprofile", "", "write a CPU profile of "+desc+" during the run to `file` (served on a loopback debug_listen)")
	flag.IntVar(&l.profsec, "profsec", 5, "seconds the -cpuprofile covers, from the start of the load")
	flag.StringVar(&l.gogc, "gogc", "", "GOGC `value` for the daemon (default: its environment's, usually 100)")
	flag.BoolVar(&l.tracing, "tracing", false, "run the daemon with tracing on, exporting every span to a local OTLP sink")
	return l
}

// Main makes the temporary directory, builds pkgs (name → package path) into it and calls run;
// then it stops what the run started and, when run failed, exits with status 1.
func (l *DaemonLoad) Main(pkgs map[string]string, run func() error) {
	if err := l.main(pkgs, run); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", l.tool, err)
		os.Exit(1)
	}
}

func (l *DaemonLoad) main(pkgs map[string]string, run func() error) error {
	dir, err := os.MkdirTemp("", l.tool+"-")
	if err != nil {
		return err
	}
	if l.keep {
		fmt.Println("dir:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	l.Dir = dir
	defer func() {
		for i := len(l.stops) - 1; i >= 0; i-- {
			l.stops[i]()
		}
	}()
	if err := BuildIn("", dir, pkgs); err != nil {
		return err
	}
	return run()
}

// Path is p joined under the run's directory.
func (l *DaemonLoad) Path(p ...string) string {
	return filepath.Join(append([]string{l.Dir}, p...)...)
}

// Defer has Main call stop when the run is over, after stopping what was started later.
func (l *DaemonLoad) Defer(stop func()) { l.stops = append(l.stops, stop) }

// Start writes cfg as the daemon's config, with a loopback debug listener when -cpuprofile asks
// for a profile, and starts the daemon on cfg's listen address with the environment -gogc and
// -tracing ask for. It returns the daemon's base URL.
func (l *DaemonLoad) Start(cfg map[string]any) (base string, err error) {
	if l.cpuprofile != "" {
		if l.debugAddr, err = FreeAddr(); err != nil {
			return "", err
		}
		cfg["debug_listen"] = l.debugAddr
	}
	b, _ := json.Marshal(cfg)
	config := l.Path(l.daemon + ".yaml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		return "", err
	}
	l.base = "http://" + cfg["listen"].(string)
	var env []string
	if l.gogc != "" {
		env = append(env, "GOGC="+l.gogc)
	}
	if l.tracing {
		sink, stop, err := TraceSink()
		if err != nil {
			return "", err
		}
		l.Defer(stop)
		env = append(env, sink)
	}
	if l.d, err = StartDaemon(l.Path(l.daemon), l.Path(l.daemon+".log"), l.base, env, "serve", "--config", config); err != nil {
		return "", err
	}
	l.Defer(l.d.Stop)
	return l.base, nil
}

// Load posts bodies to path on the daemon from -c clients, checking each answer with ok (see
// Run), and prints the summary, headed what, and the CPU the run cost; with -cpuprofile it
// profiles the daemon meanwhile.
func (l *DaemonLoad) Load(path, what string, bodies []string, ok func(status int, body []byte) bool) error {
	var profiled func() error
	if l.cpuprofile != "" {
		profiled = Profile(l.debugAddr, l.cpuprofile, l.profsec)
	}
	cpu0 := l.d.Sample()
	res, err := Run(l.base+path, "load", bodies, l.Clients, ok)
	res.Print(os.Stdout, what, l.Clients)
	res.PrintCPU(os.Stdout, l.d.Since(cpu0))
	if profiled != nil {
		if perr := profiled(); perr != nil {
			fmt.Fprintf(os.Stderr, "%s: cpu profile: %v\n", l.tool, perr)
		}
	}
	if err != nil {
		return fmt.Errorf("%w (run with -keep and see %s.log)", err, l.daemon)
	}
	return nil
}
