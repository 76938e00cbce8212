package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// The benchmark suite. Every row measures the relay and a floor in the same
// run, on the same machine, and reports their ratio: on a small, noisy
// machine absolute times mean little. What each floor is, and why, is in
// BENCHMARKS.md. A row whose floor cannot be measured here (no go tool to
// build it, say) is skipped with the reason, never given a made-up number.

// benchModule is this module's path: helpers are built from it.
const benchModule = "github.com/hai-relay/relay"

// suiteRowNames are the row groups, in run order, for --rows.
var suiteRowNames = []string{"store", "cold_start", "send", "submit", "scale"}

type suiteOptions struct {
	json       bool
	rows       map[string]bool
	messages   int
	tasks      int
	sends      int
	iterations int
	keep       bool
	src        string
	relay      string
}

// suiteRow is one line of the result.
type suiteRow struct {
	Name string `json:"name"`
	What string `json:"what"`
	// Relay and Floor are the two measurements, in Unit; Ratio is
	// Relay/Floor.
	Relay   float64 `json:"relay"`
	Floor   float64 `json:"floor"`
	Unit    string  `json:"unit"`
	FloorIs string  `json:"floor_is"`
	Ratio   float64 `json:"ratio"`
	// Aim is the target, on the ratio or on a latency; Met says whether
	// this run reached it (absent without an aim or when skipped).
	Aim string `json:"aim,omitempty"`
	Met *bool  `json:"met,omitempty"`
	// P50Ms and P99Ms are the relay's latency percentiles, where the row
	// has latencies.
	P50Ms   float64 `json:"p50_ms,omitempty"`
	P99Ms   float64 `json:"p99_ms,omitempty"`
	Samples int     `json:"samples,omitempty"`
	Note    string  `json:"note,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
}

// suiteAim is a target: ratio or p99_ms compared with a bound.
type suiteAim struct {
	on    string // "ratio" or "p99_ms"
	le    bool   // true: at most; false: at least
	bound float64
}

func (a suiteAim) String() string {
	op := ">="
	if a.le {
		op = "<="
	}
	if a.on == "p99_ms" {
		return fmt.Sprintf("p99 %s %g ms", op, a.bound)
	}
	return fmt.Sprintf("%s %gx", op, a.bound)
}

func (r *suiteRow) setAim(a suiteAim) {
	r.Aim = a.String()
	v := r.Ratio
	if a.on == "p99_ms" {
		v = r.P99Ms
	}
	met := v >= a.bound
	if a.le {
		met = v <= a.bound
	}
	r.Met = &met
}

type suiteResult struct {
	Machine map[string]string `json:"machine"`
	Command string            `json:"command"`
	Started time.Time         `json:"started"`
	Elapsed string            `json:"elapsed"`
	Rows    []suiteRow        `json:"rows"`
}

// runSuite parses the flags and runs the suite.
func runSuite(ctx context.Context, e *cliIO, args []string) error {
	o, err := parseSuiteFlags(e, args)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "relay-bench-")
	if err != nil {
		return err
	}
	s := &suite{e: e, o: o, dir: dir, bins: map[string]suiteBin{}}
	defer s.cleanup()
	// Every row but the store's drives the relay binary, as a user would.
	if len(o.rows) > 1 || !o.rows["store"] {
		if s.exe, err = s.relayBin(); err != nil {
			return err
		}
	}
	res := suiteResult{Machine: s.machine(ctx), Command: "relay-bench " + strings.Join(args, " "), Started: time.Now().UTC()}
	start := time.Now()
	if err := s.runGroups(ctx); err != nil {
		return err
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	res.Rows = s.rows
	if o.keep {
		s.progress("work directory kept: %s", dir)
	}
	if o.json {
		return printJSON(e.stdout, res)
	}
	return printSuite(e.stdout, res)
}

// parseSuiteFlags parses the command line into the suite's options; a bad
// one is explained on stderr and returned as errUsage.
func parseSuiteFlags(e *cliIO, args []string) (suiteOptions, error) {
	f := flag.NewFlagSet("relay-bench", flag.ContinueOnError)
	f.SetOutput(e.stderr)
	f.Usage = func() {
		fmt.Fprintln(e.stderr, "Usage: relay-bench [--rows LIST] [--messages N] [--tasks N] [--sends N] [--iterations N] [--relay BIN] [--keep] [--src DIR] [--json]")
		fmt.Fprintln(e.stderr, "\nThe benchmark suite of BENCHMARKS.md: each row a ratio against a floor measured in the same run.")
		f.PrintDefaults()
	}
	rows := f.String("rows", strings.Join(suiteRowNames, ","), "row `GROUPS` to run, comma-separated: "+strings.Join(suiteRowNames, ", "))
	o := suiteOptions{}
	f.IntVar(&o.messages, "messages", 1_000_000, "scale row: `N` messages stored")
	f.IntVar(&o.tasks, "tasks", 100_000, "scale row: `N` tasks stored")
	f.IntVar(&o.sends, "sends", 250, "send row: `N` send_message calls per client (8 clients)")
	f.IntVar(&o.iterations, "iterations", 20, "`N` samples for cold starts, submits and the floors of those rows; 10x that for the scale row's calls")
	f.StringVar(&o.relay, "relay", "", "the relay `BIN` to measure; default: built from the source (see --src) with the go tool")
	f.BoolVar(&o.keep, "keep", false, "keep the work directory (homes, logs, databases) and print its path")
	f.StringVar(&o.src, "src", "", "the relay's source `DIR` (go.mod), to build the relay and the floors' helpers; default: found from the working directory up")
	f.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	if err := f.Parse(args); err != nil {
		return o, errUsage
	}
	if f.NArg() > 0 {
		fmt.Fprintf(e.stderr, "relay-bench: unexpected argument %q\n", f.Arg(0))
		f.Usage()
		return o, errUsage
	}
	o.rows = map[string]bool{}
	for _, r := range strings.Split(*rows, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !slices.Contains(suiteRowNames, r) {
			return o, usageError(e, "--rows: unknown row group %q (one or more of: %s)", r, strings.Join(suiteRowNames, ", "))
		}
		o.rows[r] = true
	}
	if o.messages < 0 || o.tasks < 0 || o.sends < 1 || o.iterations < 1 {
		return o, usageError(e, "--messages and --tasks must be >= 0, --sends and --iterations >= 1")
	}
	return o, nil
}

// runGroups runs the chosen row groups in suiteRowNames' order, stopping
// each group's processes before the next, until ctx ends.
func (s *suite) runGroups(ctx context.Context) error {
	for _, g := range suiteRowNames {
		if !s.o.rows[g] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.progress("--- %s", g)
		switch g {
		case "store":
			s.rowStore(ctx)
		case "cold_start":
			s.rowColdStart(ctx)
		case "send":
			s.rowSend(ctx)
		case "submit":
			s.rowSubmit(ctx)
		case "scale":
			s.rowScale(ctx)
		}
		s.stopProcs() // each group starts from a quiet machine
	}
	return nil
}

// printSuite prints the table, then the machine and each row's notes.
func printSuite(w io.Writer, res suiteResult) error {
	t := newTable(w, "ROW", "RELAY", "FLOOR", "RATIO", "AIM", "MET", "P50", "P99")
	for _, r := range res.Rows {
		if r.Skipped != "" {
			t.row(r.Name, "-", "-", "-", r.Aim, "skipped", "-", "-")
			continue
		}
		met := "-"
		if r.Met != nil {
			met = yesNo(*r.Met)
		}
		lat := func(ms float64) string {
			if ms == 0 {
				return "-"
			}
			return fmtNum(ms) + " ms"
		}
		t.row(r.Name, fmtNum(r.Relay)+" "+r.Unit, fmtNum(r.Floor)+" "+r.Unit, fmtNum(r.Ratio)+"x", r.Aim, met, lat(r.P50Ms), lat(r.P99Ms))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nmachine: %s; %s\n", res.Machine["cpu"], res.Machine["summary"])
	fmt.Fprintf(w, "command: %s (%s)\n\n", res.Command, res.Elapsed)
	for _, r := range res.Rows {
		fmt.Fprintf(w, "%s: %s\n  floor: %s\n", r.Name, r.What, r.FloorIs)
		if r.Skipped != "" {
			fmt.Fprintf(w, "  skipped: %s\n", r.Skipped)
		}
		if r.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", r.Note)
		}
	}
	return nil
}

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// machine describes where the suite ran, and the relay it measured
// (`relay version`; "-" without one).
func (s *suite) machine(ctx context.Context) map[string]string {
	m := map[string]string{
		"goos": runtime.GOOS, "goarch": runtime.GOARCH, "go": runtime.Version(),
		"cpus": strconv.Itoa(runtime.NumCPU()), "version": s.relayVersion(ctx),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		m["memory"] = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
	}
	var u syscall.Utsname
	if err := syscall.Uname(&u); err == nil {
		m["kernel"] = utsString(u.Release[:])
	}
	m["summary"] = fmt.Sprintf("%s CPUs, %s memory, %s/%s, kernel %s, %s", m["cpus"], m["memory"], m["goos"], m["goarch"], m["kernel"], m["go"])
	return m
}

func utsString[T int8 | uint8](cs []T) string {
	var b strings.Builder
	for _, c := range cs {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// suite is one run of the suite: its work directory, built helpers,
// started processes and rows.
type suite struct {
	e    *cliIO
	o    suiteOptions
	exe  string // the relay binary
	dir  string
	bins map[string]suiteBin
	rows []suiteRow

	mu      sync.Mutex
	daemons []*suiteDaemon
	clients []*suiteClient
}

type suiteBin struct {
	path string
	err  error
}

// progress reports on stderr, so that --json output stays clean.
func (s *suite) progress(format string, args ...any) {
	fmt.Fprintf(s.e.stderr, "relay-bench: "+format+"\n", args...)
}

func (s *suite) add(r suiteRow) {
	if r.Skipped != "" {
		s.progress("%s: skipped: %s", r.Name, r.Skipped)
	} else {
		s.progress("%s: relay %s %s, floor %s %s, ratio %sx %s", r.Name, fmtNum(r.Relay), r.Unit, fmtNum(r.Floor), r.Unit, fmtNum(r.Ratio), r.Aim)
	}
	s.rows = append(s.rows, r)
}

// skip records every named row as skipped for why.
func (s *suite) skip(why error, rows ...suiteRow) {
	for _, r := range rows {
		r.Skipped = why.Error()
		r.Met = nil
		s.add(r)
	}
}

// cleanup stops every process started, then removes the work directory
// unless --keep.
func (s *suite) cleanup() {
	s.stopProcs()
	if !s.o.keep {
		_ = os.RemoveAll(s.dir)
	}
}

// stopProcs closes every MCP client (their servers exit) and stops every
// daemon started so far.
func (s *suite) stopProcs() {
	s.mu.Lock()
	cs, ds := s.clients, s.daemons
	s.clients, s.daemons = nil, nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.Close() })
	}
	wg.Wait()
	for _, d := range ds {
		d.stop()
	}
}

// moduleRoot finds the relay's source: --src, else the nearest directory
// from the working directory up whose go.mod declares the module.
func (s *suite) moduleRoot() (string, error) {
	isRoot := func(d string) bool {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err != nil {
			return false
		}
		line, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimSpace(line) == "module "+benchModule
	}
	if s.o.src != "" {
		if !isRoot(s.o.src) {
			return "", fmt.Errorf("--src %s has no go.mod for %s", s.o.src, benchModule)
		}
		return s.o.src, nil
	}
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRoot(d) {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("the relay's source (go.mod of %s) is not in the working directory or above it; run relay-bench from the repository or pass --src DIR (or --relay BIN)", benchModule)
		}
		d = up
	}
}

// relayBin is the relay to measure: --relay, else built from the source.
func (s *suite) relayBin() (string, error) {
	if s.o.relay != "" {
		return filepath.Abs(s.o.relay)
	}
	return s.bin("cmd/relay")
}

// relayVersion is the measured relay's `relay version`, or "-".
func (s *suite) relayVersion(ctx context.Context) string {
	if s.exe == "" {
		return "-"
	}
	out, err := exec.CommandContext(ctx, s.exe, "version", "--json").Output()
	var v struct {
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version == "" {
		return "-"
	}
	return v.Version
}

// bin builds one of the module's programs (the relay, and the floors'
// cmd/testfakes/mcpfloor, fakeauthority and fakeagent) with the go tool,
// once.
func (s *suite) bin(pkg string) (string, error) {
	if b, ok := s.bins[pkg]; ok {
		return b.path, b.err
	}
	path, err := s.build(pkg)
	s.bins[pkg] = suiteBin{path, err}
	return path, err
}

func (s *suite) build(pkg string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("cannot build %s: the go tool is not on PATH", pkg)
	}
	root, err := s.moduleRoot()
	if err != nil {
		return "", fmt.Errorf("cannot build %s: %w", pkg, err)
	}
	out := filepath.Join(s.dir, "bin", filepath.Base(pkg))
	s.progress("building %s", pkg)
	cmd := exec.Command(goTool, "build", "-o", out, benchModule+"/"+pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// --- processes ---

// suiteDaemon is a relay daemon the suite started on a home of its own.
type suiteDaemon struct {
	home string
	cmd  *exec.Cmd
	done chan struct{}
}

// startDaemon runs `relay daemon --home home` and waits until its socket
// answers.
func (s *suite) startDaemon(ctx context.Context, home string) (*suiteDaemon, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(s.dir, filepath.Base(home)+"-daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	d := &suiteDaemon{home: home, done: make(chan struct{})}
	d.cmd = exec.Command(s.exe, "daemon", "--home", home)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	s.mu.Lock()
	s.daemons = append(s.daemons, d)
	s.mu.Unlock()
	c := socketapi.NewClient(filepath.Join(home, homeSocket), socketapi.ClientOptions{Timeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := c.Version(ctx); err == nil {
			return d, nil
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("the daemon on %s exited at start; see %s", home, logf.Name())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon on %s did not answer within 2 minutes", home)
		}
	}
}

// stop sends SIGTERM and waits (then kills).
func (d *suiteDaemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// rss returns the process's resident set size and its peak, in MiB, from
// /proc/PID/status.
func (d *suiteDaemon) rss() (cur, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read daemon RSS: %w", err)
	}
	kib := func(key string) float64 {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, key+":"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					n, _ := strconv.ParseFloat(f[0], 64)
					return n / 1024
				}
			}
		}
		return 0
	}
	return kib("VmRSS"), kib("VmHWM"), nil
}

// mcpClient starts argv as an MCP stdio server and initializes it.
func (s *suite) mcpClient(ctx context.Context, argv []string) (*suiteClient, error) {
	c, err := startSuiteClient(ctx, argv)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	return c, nil
}

func (s *suite) facadeArgv(home, agent string) []string {
	return []string{s.exe, "mcp", "--as", agent, "--home", home, "--no-autostart"}
}

// --- statistics ---

// pctl returns the q-quantile (nearest rank) of ds.
func pctl(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// --- rows ---

const suiteBody = "a short passive message of about sixty-four bytes, give or take."

// rowStore: the store alone, in this process: CreateMessage from 8
// goroutines (group commit, FULL) vs one-insert-per-transaction FULL.
func (s *suite) rowStore(ctx context.Context) {
	row := suiteRow{Name: "store_create_message_8", Unit: "msg/s",
		What:    "persistence.CreateMessage (row + audit row) from 8 goroutines in this process, synchronous=FULL, group commit",
		FloorIs: "plain SQLite inserts of a message-shaped row, one transaction (one WAL fsync) each, synchronous=FULL (persistencetest.InsertFloor)"}
	aim := suiteAim{on: "ratio", bound: 3}
	row.Aim = aim.String()
	n := 8 * s.o.sends
	// Every message goes to one recipient: no inbox quota, which would
	// refuse them past its 1000 unacknowledged messages.
	db, err := persistence.Open(ctx, filepath.Join(s.dir, "store.db"), persistence.Options{Synchronous: persistence.SyncFull,
		InboxMessages: persistence.NoLimit, InboxBytes: persistence.NoLimit})
	if err != nil {
		s.skip(err, row)
		return
	}
	defer db.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	lat := make([]time.Duration, n)
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				_, err := db.CreateMessage(ctx, model.Message{ID: "MSG-store-" + strconv.Itoa(i), From: "codex", To: "claude", Body: suiteBody})
				lat[i] = time.Since(t0)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		s.skip(err, row)
		return
	}
	floor, err := persistencetest.InsertFloor(ctx, filepath.Join(s.dir, "store-floor.db"), persistence.SyncFull, n, suiteBody)
	if err != nil {
		s.skip(err, row)
		return
	}
	st := db.WriterStats()
	row.Relay, row.Floor = float64(n)/elapsed.Seconds(), floor.PerSecond()
	row.Ratio = ratio(row.Relay, row.Floor)
	row.P50Ms, row.P99Ms, row.Samples = ms(pctl(lat, 0.5)), ms(pctl(lat, 0.99)), n
	row.Note = fmt.Sprintf("%.1f requests per commit on average (largest %d); floor p50 %.2f ms per insert",
		ratio(float64(st.Requests), float64(st.Batches)), st.MaxBatch, ms(pctl(floor.Latencies, 0.5)))
	row.setAim(aim)
	s.add(row)
}

// mcpInitializeLine is an MCP initialize request on one line.
const mcpInitializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"relay-bench","version":"0"}}}` + "\n"

// timeToFirstLine execs argv, writes line to its stdin and returns the time
// from exec to the first line of its stdout; the process is then killed.
func timeToFirstLine(argv []string, dir, line string) (time.Duration, string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, "", err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, "", err
	}
	defer func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if _, err := io.WriteString(in, line); err != nil {
		return 0, "", err
	}
	got, err := bufio.NewReader(out).ReadString('\n')
	d := time.Since(start)
	if err != nil {
		return 0, "", fmt.Errorf("%s: no answer: %w", argv[0], err)
	}
	return d, got, nil
}

// rowColdStart: exec → initialize answered, the facade (with a daemon
// running, so it also reaches it) vs a minimal mcp-go stdio server.
func (s *suite) rowColdStart(ctx context.Context) {
	row := suiteRow{Name: "facade_cold_start", Unit: "ms",
		What:    "relay mcp --as claude: exec until the initialize answer's line arrives (p50), daemon already running",
		FloorIs: "cmd/testfakes/mcpfloor, a minimal mcp-go stdio server with one tool: exec until its initialize answer (p50)"}
	aim := suiteAim{on: "ratio", le: true, bound: 1.3}
	row.Aim = aim.String()
	floorBin, err := s.bin("cmd/testfakes/mcpfloor")
	if err != nil {
		s.skip(err, row)
		return
	}
	home := filepath.Join(s.dir, "cold")
	if _, err := s.startDaemon(ctx, home); err != nil {
		s.skip(err, row)
		return
	}
	var relay, floor []time.Duration
	// Alternate, so drift in the machine's load hits both alike; one
	// unmeasured round first warms the page cache for both binaries.
	for i := -1; i < s.o.iterations; i++ {
		f, _, err := timeToFirstLine([]string{floorBin}, s.dir, mcpInitializeLine)
		if err != nil {
			s.skip(err, row)
			return
		}
		r, _, err := timeToFirstLine(s.facadeArgv(home, "claude"), s.dir, mcpInitializeLine)
		if err != nil {
			s.skip(err, row)
			return
		}
		if i >= 0 {
			floor, relay = append(floor, f), append(relay, r)
		}
	}
	row.Relay, row.Floor = ms(pctl(relay, 0.5)), ms(pctl(floor, 0.5))
	row.Ratio = ratio(row.Relay, row.Floor)
	row.P50Ms, row.P99Ms, row.Samples = ms(pctl(relay, 0.5)), ms(pctl(relay, 0.99)), len(relay)
	row.Note = fmt.Sprintf("floor p99 %.2f ms", ms(pctl(floor, 0.99)))
	row.setAim(aim)
	s.add(row)
}

// sendRound sends per messages from each client concurrently and returns
// the rate and every call's latency.
func sendRound(ctx context.Context, clients []*suiteClient, to func(k int) string, per int) (float64, []time.Duration, error) {
	lat := make([]time.Duration, len(clients)*per)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for k, c := range clients {
		wg.Go(func() {
			for i := range per {
				t0 := time.Now()
				err := c.call(ctx, "send_message", map[string]any{"to": to(k), "body": suiteBody}, nil)
				lat[k*per+i] = time.Since(t0)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, nil, err
	}
	return float64(len(lat)) / time.Since(start).Seconds(), lat, nil
}

// rowSend: send_message through 8 concurrent facades, against 8 clients of
// the mcp-go floor and against one-insert-per-transaction FULL inserts.
func (s *suite) rowSend(ctx context.Context) {
	vsMCP := suiteRow{Name: "send_message_8_facades", Unit: "msg/s",
		What:    "send_message through 8 concurrent relay mcp facades (MCP stdio → socket → daemon → SQLite FULL, group commit)",
		FloorIs: "the same 8 clients against 8 cmd/testfakes/mcpfloor servers, whose send_message stores nothing"}
	vsMCPAim := suiteAim{on: "ratio", bound: 0.6}
	vsMCP.Aim = vsMCPAim.String()
	vsSQL := suiteRow{Name: "send_message_8_vs_inserts", Unit: "msg/s",
		What:    "the same send_message rate",
		FloorIs: "plain SQLite inserts of a message-shaped row, one transaction (one WAL fsync) each, synchronous=FULL (persistencetest.InsertFloor)"}
	vsSQLAim := suiteAim{on: "ratio", bound: 3}
	vsSQL.Aim = vsSQLAim.String()
	latRow := suiteRow{Name: "send_message_latency", Unit: "ms",
		What:    "send_message round trip seen by each of the 8 MCP clients (p99; p50 beside it)",
		FloorIs: "the floor's p99 round trip with 8 clients of cmd/testfakes/mcpfloor"}
	latAim := suiteAim{on: "p99_ms", le: true, bound: 10}
	latRow.Aim = latAim.String()

	relays, err := s.sendRelays(ctx)
	if err != nil {
		s.skip(err, vsMCP, vsSQL, latRow)
		return
	}
	floors, floorErr := s.sendFloors(ctx)
	m, err := sendMeasure(ctx, relays, floors, floorErr, max(s.o.sends/2, 1))
	if err != nil {
		s.skip(err, vsMCP, vsSQL, latRow)
		return
	}
	mcpFloor := s.addSendVsMCP(vsMCP, vsMCPAim, m)
	s.addSendVsInserts(ctx, vsSQL, vsSQLAim, m, mcpFloor)
	s.addSendLatency(latRow, latAim, m)
}

// sendSide is one side of the send rows: its 8 clients, and whom client k
// sends to.
type sendSide struct {
	clients []*suiteClient
	to      func(k int) string
}

// sendRelays starts the send rows' daemon and 8 facades on it, as the core
// agents in turn; each sends to the agent after its own.
func (s *suite) sendRelays(ctx context.Context) (sendSide, error) {
	agents := model.CoreAgents()
	side := sendSide{to: func(k int) string { return agents[(k+1)%len(agents)] }}
	home := filepath.Join(s.dir, "send")
	// Nobody acknowledges: no inbox quota, which would refuse a sender
	// past its share of the recipient's inbox (250 of 1000 by default).
	if err := os.MkdirAll(home, 0o700); err != nil {
		return side, err
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[limits]\ninbox_messages = 0\ninbox_bytes = 0\n"), 0o600); err != nil {
		return side, err
	}
	if _, err := s.startDaemon(ctx, home); err != nil {
		return side, err
	}
	for k := range 8 {
		c, err := s.mcpClient(ctx, s.facadeArgv(home, agents[k%len(agents)]))
		if err != nil {
			return side, err
		}
		side.clients = append(side.clients, c)
	}
	return side, nil
}

// sendFloors starts 8 mcpfloor servers, all sent to as codex. Their error
// costs only the rows against them.
func (s *suite) sendFloors(ctx context.Context) (sendSide, error) {
	side := sendSide{to: func(int) string { return "codex" }}
	floorBin, err := s.bin("cmd/testfakes/mcpfloor")
	if err != nil {
		return side, err
	}
	for range 8 {
		c, err := s.mcpClient(ctx, []string{floorBin})
		if err != nil {
			return side, err
		}
		side.clients = append(side.clients, c)
	}
	return side, nil
}

// sendSamples are one side's measured rounds: every call's latency, the
// rounds' wall time summed (seconds) and the CPU they cost by process kind.
type sendSamples struct {
	lat  []time.Duration
	time float64
	cpu  cpuSample
}

// round runs one measured round, per messages from each client of side,
// and adds it to p; a failed round adds nothing.
func (p *sendSamples) round(ctx context.Context, side sendSide, per int) error {
	before := sampleCPU()
	r, lat, err := sendRound(ctx, side.clients, side.to, per)
	if err != nil {
		return err
	}
	p.cpu.add(before, sampleCPU())
	p.lat, p.time = append(p.lat, lat...), p.time+float64(len(lat))/r
	return nil
}

// rate is the side's messages per second over its rounds.
func (p *sendSamples) rate() float64 { return float64(len(p.lat)) / p.time }

// pctl is the side's q-quantile latency in ms.
func (p *sendSamples) pctl(q float64) float64 { return ms(pctl(p.lat, q)) }

// sendMeasured is what the send rows are made of: the relay's samples, and
// the floor's unless floorErr.
type sendMeasured struct {
	relay, floor sendSamples
	floorErr     error
}

// sendMeasure warms both sides up (unmeasured), then runs two rounds of
// half messages per client on each. An error of the relay's is returned;
// one of the floor's (or the floorErr given, from starting it) is kept in
// floorErr and ends only the floor's rounds.
func sendMeasure(ctx context.Context, relays, floors sendSide, floorErr error, half int) (sendMeasured, error) {
	m := sendMeasured{relay: sendSamples{cpu: cpuSample{}}, floor: sendSamples{cpu: cpuSample{}}, floorErr: floorErr}
	// Warm up both (connections, page cache), unmeasured.
	if _, _, err := sendRound(ctx, relays.clients, relays.to, 10); err != nil {
		return m, err
	}
	if m.floorErr == nil {
		_, _, m.floorErr = sendRound(ctx, floors.clients, floors.to, 10)
	}
	// Two rounds each, interleaved, so a change in the machine's load
	// hits both alike.
	for range 2 {
		if err := m.relay.round(ctx, relays, half); err != nil {
			return m, err
		}
		if m.floorErr == nil {
			m.floorErr = m.floor.round(ctx, floors, half)
		}
	}
	return m, nil
}

// addSendVsMCP fills and adds the rate row against the MCP floor, or skips
// it without that floor. It returns the floor's rate (0 when skipped),
// which bounds the row against inserts.
func (s *suite) addSendVsMCP(row suiteRow, aim suiteAim, m sendMeasured) float64 {
	if m.floorErr != nil {
		s.skip(m.floorErr, row)
		return 0
	}
	row.Relay, row.Floor = m.relay.rate(), m.floor.rate()
	row.Ratio = ratio(row.Relay, row.Floor)
	row.P50Ms, row.P99Ms, row.Samples = m.relay.pctl(0.5), m.relay.pctl(0.99), len(m.relay.lat)
	row.Note = "CPU per call: relay: " + m.relay.cpu.perCall(len(m.relay.lat), "clients", "facades", "daemon") +
		"; floor: " + m.floor.cpu.perCall(len(m.floor.lat), "clients", "mcpfloor")
	row.setAim(aim)
	s.add(row)
	return row.Floor
}

// addSendVsInserts measures as many FULL inserts as the relay sent, then
// fills and adds the rate row against them (skipped if they fail).
// mcpFloor is the MCP floor's rate, 0 without one.
func (s *suite) addSendVsInserts(ctx context.Context, row suiteRow, aim suiteAim, m sendMeasured, mcpFloor float64) {
	floor, err := persistencetest.InsertFloor(ctx, filepath.Join(s.dir, "send-floor.db"), persistence.SyncFull, len(m.relay.lat), suiteBody)
	if err != nil {
		s.skip(err, row)
		return
	}
	row.Relay, row.Floor = m.relay.rate(), floor.PerSecond()
	row.Ratio = ratio(row.Relay, row.Floor)
	row.P50Ms, row.P99Ms, row.Samples = m.relay.pctl(0.5), m.relay.pctl(0.99), len(m.relay.lat)
	row.Note = fmt.Sprintf("floor p50 %.2f ms, p99 %.2f ms per insert", ms(pctl(floor.Latencies, 0.5)), ms(pctl(floor.Latencies, 0.99)))
	if mcpFloor > 0 {
		// The relay does everything the MCP floor does and more, so
		// the floor's own rate bounds this ratio in this run.
		row.Note += fmt.Sprintf("; bound: the MCP floor itself (storing nothing) reaches %.2fx of these inserts in this run", ratio(mcpFloor, row.Floor))
	}
	row.setAim(aim)
	s.add(row)
}

// addSendLatency fills and adds the latency row: the relay's p99, against
// the MCP floor's when there is one.
func (s *suite) addSendLatency(row suiteRow, aim suiteAim, m sendMeasured) {
	p50, p99 := m.relay.pctl(0.5), m.relay.pctl(0.99)
	row.Relay, row.P50Ms, row.P99Ms, row.Samples = p99, p50, p99, len(m.relay.lat)
	if m.floorErr == nil {
		row.Floor = m.floor.pctl(0.99)
		row.Ratio = ratio(row.Relay, row.Floor)
		row.Note = fmt.Sprintf("floor p50 %.2f ms", m.floor.pctl(0.5))
	} else {
		row.Note = "no floor: " + m.floorErr.Error()
	}
	row.setAim(aim)
	s.add(row)
}

// rowSubmit: submit_task → authorized with the fake authority adapter, and
// the dispatch of the fake agent, each against its direct spawn. The submit
// answers once the task is stored (submitted); the gates run after it, so
// the row times the call's start to the authorized event in the task's
// timeline (the daemon's wall clock, on the same host).
func (s *suite) rowSubmit(ctx context.Context) {
	subRow := suiteRow{Name: "submit_to_authorized", Unit: "ms",
		What: "submit_task through a facade until the task is authorized (its authorized event in the timeline; p50), " +
			"the fake authority adapter consulted once",
		FloorIs: "the fake authority adapter alone: exec, request on stdin, answer read, exit (p50)"}
	dispRow := suiteRow{Name: "dispatch_overhead", Unit: "ms",
		What:    "authorized → working in the task's timeline: spawn of the fake ACP agent, initialize, session/new, the working transition (p50)",
		FloorIs: "a direct spawn of the fake agent, initialize and session/new over its stdio (p50)"}
	dispAim := suiteAim{on: "ratio", le: true, bound: 1.2}
	dispRow.Aim = dispAim.String()

	rig, err := s.startSubmitRig(ctx)
	if err != nil {
		s.skip(err, subRow, dispRow)
		return
	}
	defer rig.op.Close()
	var m submitSamples
	// Relay and floor samples alternate, so that both see the same load.
	for i := -1; i < s.o.iterations; i++ { // one unmeasured warm-up
		x, err := s.submitRound(ctx, rig)
		if err != nil {
			s.skip(err, subRow, dispRow)
			return
		}
		if i >= 0 {
			m.add(x)
		}
	}
	s.addSubmitRow(subRow, m)
	s.addDispatchRow(dispRow, dispAim, m, rig.daemon)
}

// submitRig is what the submit rows drive: a daemon whose authority is
// the fake authority adapter and whose claude is the fake agent, a codex
// facade and an operator's socket client on it, and for the floors the
// two fakes and a request for the adapter.
type submitRig struct {
	auth, agent string
	daemon      *suiteDaemon
	facade      *suiteClient
	op          *socketapi.Client // the caller closes it
	req         string            // an authority request on one line
}

// startSubmitRig builds the fakes, writes the home's configuration and
// starts its daemon, the facade and the operator's client.
func (s *suite) startSubmitRig(ctx context.Context) (submitRig, error) {
	var r submitRig
	auth, err := s.bin("cmd/testfakes/fakeauthority")
	if err != nil {
		return r, err
	}
	fake, err := s.bin("cmd/testfakes/fakeagent")
	if err != nil {
		return r, err
	}
	// The fake agent installed as claude's current adapter, so the daemon
	// runs it under claude's hardening profile as it would the real one
	// (an adapter that names no package is refused).
	agent, err := dispatchtest.InstallAdapter(filepath.Join(s.dir, "adapters"), fake, "claude")
	if err != nil {
		return r, err
	}
	home := filepath.Join(s.dir, "submit")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return r, err
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[authority]\ncommand = [%q, \"allow-guarded\"]\n\n", auth)
	fmt.Fprintf(&cfg, "[agents.claude]\ncommand = [%q]\n", agent)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg.String()), 0o600); err != nil {
		return r, err
	}
	daemon, err := s.startDaemon(ctx, home)
	if err != nil {
		return r, err
	}
	c, err := s.mcpClient(ctx, s.facadeArgv(home, "codex"))
	if err != nil {
		return r, err
	}
	r = submitRig{auth: auth, agent: agent, daemon: daemon, facade: c,
		op: socketapi.NewClient(filepath.Join(home, homeSocket), socketapi.ClientOptions{})}
	r.req = `{"version":1,"request_id":"bench","task_id":"T-bench","mission_id":"M-bench","lease_id":"S-bench","caller":"codex","target":"claude","mode":"read_only","requested_at":"` +
		time.Now().UTC().Format(time.RFC3339) + `"}` + "\n"
	return r, nil
}

// submitSample is one round of the submit rows: the relay's times, then
// one sample of each floor.
type submitSample struct {
	submit    time.Duration // submit_task's start to the authorized event
	answer    time.Duration // submit_task's answer (the task stored)
	adapter   time.Duration // the authority adapter's run, as the relay timed it
	dispatch  time.Duration // the authorized event to the working one
	authFloor time.Duration // the fake authority adapter run alone
	acpFloor  time.Duration // the fake agent spawned and set up alone
}

// submitSamples are the measured rounds, field by field.
type submitSamples struct {
	submit, answer, adapter, dispatch, authFloor, acpFloor []time.Duration
}

// add appends one measured round.
func (m *submitSamples) add(x submitSample) {
	m.submit, m.answer = append(m.submit, x.submit), append(m.answer, x.answer)
	m.adapter, m.dispatch = append(m.adapter, x.adapter), append(m.dispatch, x.dispatch)
	m.authFloor, m.acpFloor = append(m.authFloor, x.authFloor), append(m.acpFloor, x.acpFloor)
}

// submitRound submits one task through the facade, waits for it to
// complete and reads its timeline, then runs each floor once.
func (s *suite) submitRound(ctx context.Context, r submitRig) (submitSample, error) {
	var x submitSample
	var t struct {
		TaskID string `json:"task_id"`
		State  string `json:"state"`
		Code   string `json:"code"`
	}
	t0 := time.Now()
	err := r.facade.call(ctx, "submit_task", map[string]any{"target": "claude", "prompt": "echo bench",
		"mission_id": "M-bench", "lease_id": "S-bench"}, &t)
	x.answer = time.Since(t0)
	if err == nil && t.State == "" {
		err = fmt.Errorf("submit_task answered no state")
	}
	if err != nil {
		return x, err
	}
	detail, err := suiteWaitDone(ctx, r.op, t.TaskID)
	if err != nil {
		return x, err
	}
	authAt, workAt, el := submitTimeline(detail)
	if authAt.IsZero() || workAt.IsZero() || el == 0 {
		return x, fmt.Errorf("task %s: no authorized/working events or authority elapsed in its timeline (state %s)", t.TaskID, detail.State)
	}
	x.submit = authAt.Sub(t0) // wall clocks of one host: authAt has no monotonic reading
	x.adapter, x.dispatch = el, workAt.Sub(authAt)
	if x.authFloor, err = suiteRunAdapter(r.auth, r.req); err != nil {
		return x, err
	}
	if x.acpFloor, err = suiteACPSetup(r.agent, s.dir); err != nil {
		return x, err
	}
	return x, nil
}

// submitTimeline reads a task's authorized and working events' times and
// the authority adapter's run as the relay timed it (zero when absent).
func submitTimeline(d model.TaskDetail) (authAt, workAt time.Time, adapter time.Duration) {
	for _, ev := range d.Events {
		switch ev.To {
		case model.StateAuthorized:
			authAt = ev.At
		case model.StateWorking:
			workAt = ev.At
		}
	}
	for _, v := range d.Verdicts {
		if v.Gate == model.GateAuthority {
			adapter, _ = time.ParseDuration(v.Detail["elapsed"])
		}
	}
	return authAt, workAt, adapter
}

// addSubmitRow fills and adds the submit row; its note parts the relay's
// own share from the adapter's run inside it.
func (s *suite) addSubmitRow(row suiteRow, m submitSamples) {
	row.Relay, row.Floor = ms(pctl(m.submit, 0.5)), ms(pctl(m.authFloor, 0.5))
	row.Ratio = ratio(row.Relay, row.Floor)
	row.P50Ms, row.P99Ms, row.Samples = ms(pctl(m.submit, 0.5)), ms(pctl(m.submit, 0.99)), len(m.submit)
	share := make([]time.Duration, len(m.submit))
	for i := range m.submit {
		share[i] = m.submit[i] - m.adapter[i]
	}
	row.Note = fmt.Sprintf("the relay's own share (submit to authorized minus the adapter's run as the relay timed it): p50 %.2f ms (%.0f%%); adapter p50 %.2f ms inside the relay; the submit's answer (the task stored, before its gates) p50 %.2f ms",
		ms(pctl(share, 0.5)), 100*ratio(ms(pctl(share, 0.5)), row.Relay), ms(pctl(m.adapter, 0.5)), ms(pctl(m.answer, 0.5)))
	s.add(row)
}

// addDispatchRow fills and adds the dispatch row; its note ends with the
// daemon's memory after the runs, when it can be read.
func (s *suite) addDispatchRow(row suiteRow, aim suiteAim, m submitSamples, daemon *suiteDaemon) {
	row.Relay, row.Floor = ms(pctl(m.dispatch, 0.5)), ms(pctl(m.acpFloor, 0.5))
	row.Ratio = ratio(row.Relay, row.Floor)
	row.P50Ms, row.P99Ms, row.Samples = ms(pctl(m.dispatch, 0.5)), ms(pctl(m.dispatch, 0.99)), len(m.dispatch)
	row.Note = fmt.Sprintf("floor p99 %.2f ms; timeline times are the daemon's clock", ms(pctl(m.acpFloor, 0.99)))
	// What the runs leave in the daemon: its memory after them.
	if cur, peak, err := daemon.rss(); err == nil {
		row.Note += fmt.Sprintf("; daemon VmRSS %.1f MiB (peak %.1f MiB) after %d dispatches", cur, peak, len(m.dispatch)+1)
	}
	row.setAim(aim)
	s.add(row)
}

// suiteWaitDone polls a task until it is terminal and returns its detail.
// The first look waits 50 ms, past the dispatch being measured, so that
// the bench's own calls do not load the daemon during it.
func suiteWaitDone(ctx context.Context, op *socketapi.Client, id string) (model.TaskDetail, error) {
	deadline := time.Now().Add(30 * time.Second)
	time.Sleep(50 * time.Millisecond)
	for {
		d, err := op.ShowTask(ctx, id)
		if err != nil {
			return d, err
		}
		if d.State.Terminal() {
			if d.State != model.StateCompleted {
				return d, fmt.Errorf("task %s ended %s (%s): %s", id, d.State, d.Code, d.Message)
			}
			return d, nil
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("task %s still %s after 30 s", id, d.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// suiteRunAdapter runs the authority adapter once, as the relay does:
// request on stdin, stdin closed, answer read, exit waited for.
func suiteRunAdapter(bin, req string) (time.Duration, error) {
	cmd := exec.Command(bin, "allow-guarded")
	cmd.Stdin = strings.NewReader(req)
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil || !strings.Contains(string(out), `"allow"`) {
		return 0, fmt.Errorf("fake authority: %v: %q", err, out)
	}
	return d, nil
}

// suiteACPSetup spawns the fake agent and runs initialize and session/new
// on its stdio, the dispatcher's setup without the relay around it.
func suiteACPSetup(bin, cwd string) (time.Duration, error) {
	cmd := exec.Command(bin)
	cmd.Dir = cwd
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	r := bufio.NewReader(out)
	call := func(id int, method, params string) error {
		if _, err := fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return fmt.Errorf("fake agent %s: %w", method, err)
			}
			var m struct {
				ID    *int            `json:"id"`
				Error json.RawMessage `json:"error"`
			}
			if json.Unmarshal(line, &m) == nil && m.ID != nil && *m.ID == id {
				if len(m.Error) > 0 && string(m.Error) != "null" {
					return fmt.Errorf("fake agent %s: %s", method, m.Error)
				}
				return nil
			}
		}
	}
	if err := call(1, "initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}`); err != nil {
		return 0, err
	}
	cwdJSON, _ := json.Marshal(cwd)
	if err := call(2, "session/new", `{"cwd":`+string(cwdJSON)+`,"mcpServers":[]}`); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// rowScale: the agent and operator reads on a store with months of history
// (--messages, --tasks), against the same reads on a store 1000 times
// smaller, and the daemon's RSS.
func (s *suite) rowScale(ctx context.Context) {
	size := fmt.Sprintf("%d messages, %d tasks", s.o.messages, s.o.tasks)
	// The floor's store has the same inboxes (as many unread messages)
	// and a thousandth of the history: the ratio is what history costs.
	unread := persistencetest.SeedUnread(s.o.messages)
	bigSize := suiteSize{messages: s.o.messages, tasks: s.o.tasks, unread: unread}
	small := suiteSize{messages: s.o.messages/1000 + unread, tasks: max(s.o.tasks/1000, 10), unread: unread}
	smallSize := fmt.Sprintf("%d messages of which %d unread as in the big one, %d tasks", small.messages, small.unread, small.tasks)
	aim := suiteAim{on: "p99_ms", le: true, bound: 5}
	rows := []suiteRow{
		{Name: "scale_check_inbox", Unit: "ms", What: "check_inbox (defaults: unread_only, limit 50) through a facade, p99 with " + size},
		{Name: "scale_list_tasks", Unit: "ms", What: "list_tasks (defaults: limit 50) through a facade, p99 with " + size},
		{Name: "scale_tasks_show", Unit: "ms", What: "relay tasks show's daemon call (task, events, verdicts over the socket), p99 with " + size},
		{Name: "scale_daemon_rss", Unit: "MiB", What: "the daemon's VmRSS after those calls, with " + size},
	}
	for i := range rows[:3] {
		rows[i].FloorIs = "the same call, p99, on a store with the same inboxes and a thousandth of the history (" + smallSize + ")"
		rows[i].Aim = aim.String()
	}
	rows[3].FloorIs = "the daemon's VmRSS after the same calls on that small store"

	big, err := s.scaleMeasure(ctx, "scale-big", bigSize)
	if err != nil {
		s.skip(err, rows...)
		return
	}
	little, err := s.scaleMeasure(ctx, "scale-small", small)
	if err != nil {
		s.skip(err, rows...)
		return
	}
	for i, lat := range [][2][]time.Duration{{big.inbox, little.inbox}, {big.list, little.list}, {big.show, little.show}} {
		r := &rows[i]
		r.Relay, r.Floor = ms(pctl(lat[0], 0.99)), ms(pctl(lat[1], 0.99))
		r.Ratio = ratio(r.Relay, r.Floor)
		r.P50Ms, r.P99Ms, r.Samples = ms(pctl(lat[0], 0.5)), r.Relay, len(lat[0])
		r.Note = fmt.Sprintf("floor p50 %.2f ms", ms(pctl(lat[1], 0.5)))
		r.setAim(aim)
	}
	rows[0].Note += fmt.Sprintf("; %d of the calls marked messages read (a write, FULL), the others only read", big.inboxMarked)
	rows[3].Relay, rows[3].Floor = big.rss, little.rss
	rows[3].Ratio = ratio(big.rss, little.rss)
	rows[3].Note = fmt.Sprintf("peak (VmHWM) %.1f MiB; database %s; seeded in %s", big.hwm, suiteBytes(big.dbBytes), big.seed.Round(time.Second))
	for _, r := range rows {
		s.add(r)
	}
}

type suiteSize struct{ messages, tasks, unread int }

type scaleResult struct {
	inbox, list, show []time.Duration
	inboxMarked       int
	rss, hwm          float64
	dbBytes           int64
	seed              time.Duration
}

// suiteBytes writes a database's size in binary units ("640 MiB", "1.2 GiB").
func suiteBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// scaleMeasure seeds a home of the given size, starts its daemon and times
// the three reads.
func (s *suite) scaleMeasure(ctx context.Context, name string, sz suiteSize) (scaleResult, error) {
	var res scaleResult
	home := filepath.Join(s.dir, name)
	var err error
	if res.seed, res.dbBytes, err = s.scaleSeed(ctx, name, home, sz); err != nil {
		return res, err
	}
	d, err := s.startDaemon(ctx, home)
	if err != nil {
		return res, err
	}
	agents := model.CoreAgents()
	var cs []*suiteClient
	for _, a := range agents {
		c, err := s.mcpClient(ctx, s.facadeArgv(home, a))
		if err != nil {
			return res, err
		}
		cs = append(cs, c)
	}
	op := socketapi.NewClient(filepath.Join(home, homeSocket), socketapi.ClientOptions{})
	defer op.Close()
	ids, err := scaleTaskIDs(ctx, op, agents)
	if err != nil {
		return res, err
	}
	if len(ids) == 0 {
		return res, fmt.Errorf("%s: no tasks to show", name)
	}
	if err := s.scaleReads(ctx, &res, cs, op, ids); err != nil {
		return res, err
	}
	res.rss, res.hwm, err = d.rss()
	return res, err
}

// scaleSeed seeds the database of a new home with sz and returns how long
// that took and the database's size (0 if it cannot be read).
func (s *suite) scaleSeed(ctx context.Context, name, home string, sz suiteSize) (time.Duration, int64, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return 0, 0, err
	}
	s.progress("%s: seeding %d messages (%d unread) and %d tasks", name, sz.messages, sz.unread, sz.tasks)
	start := time.Now()
	db, err := persistence.Open(ctx, filepath.Join(home, homeDB), persistence.Options{})
	if err != nil {
		return 0, 0, err
	}
	err = persistencetest.Seed(ctx, db, persistencetest.SeedOptions{Messages: sz.messages, Tasks: sz.tasks, Unread: sz.unread})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	seed := time.Since(start)
	var size int64
	if fi, err := os.Stat(filepath.Join(home, homeDB)); err == nil {
		size = fi.Size()
	}
	return seed, size, nil
}

// scaleTaskIDs lists up to 20 tasks of each agent, the tasks the show
// calls go through.
func scaleTaskIDs(ctx context.Context, op *socketapi.Client, agents []string) ([]string, error) {
	var ids []string
	for _, a := range agents {
		ts, err := op.Tasks(ctx, model.TaskFilter{Agent: a, Limit: 20})
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
	}
	return ids, nil
}

// scaleReads times 10x --iterations calls of each read, in turn, after one
// warm-up call per agent: check_inbox and list_tasks through the facades
// (cs, one per agent, in rotation), then the operator's task show over ids.
func (s *suite) scaleReads(ctx context.Context, res *scaleResult, cs []*suiteClient, op *socketapi.Client, ids []string) error {
	n := 10 * s.o.iterations
	var err error
	res.inbox, err = timeCalls(len(cs), n, func(i int) error {
		var in struct {
			Messages []struct {
				State string `json:"state"`
			} `json:"messages"`
		}
		err := cs[i%len(cs)].call(ctx, "check_inbox", map[string]any{}, &in)
		if len(in.Messages) > 0 {
			res.inboxMarked++
		}
		return err
	})
	if err != nil {
		return err
	}
	res.list, err = timeCalls(len(cs), n, func(i int) error { return cs[i%len(cs)].call(ctx, "list_tasks", map[string]any{}, nil) })
	if err != nil {
		return err
	}
	res.show, err = timeCalls(len(cs), n, func(i int) error {
		_, err := op.ShowTask(ctx, ids[(i*7)%len(ids)])
		return err
	})
	return err
}

// timeCalls calls f warm times unmeasured, then n times measured, and
// returns the measured calls' times. f gets the call's number, counting the
// warm-ups from 0.
func timeCalls(warm, n int, f func(i int) error) ([]time.Duration, error) {
	var out []time.Duration
	for i := -warm; i < n; i++ {
		t0 := time.Now()
		if err := f(i + warm); err != nil {
			return nil, err
		}
		if i >= 0 {
			out = append(out, time.Since(t0))
		}
	}
	return out, nil
}
