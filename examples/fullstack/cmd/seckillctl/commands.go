package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Environment variables read by seckillctl. SECKILL_ADMIN_ADDR is the
// variable the service reads for its admin listener too: set once, both
// sides agree.
const (
	envToken = "SECKILL_ADMIN_TOKEN"
	envAddr  = "SECKILL_ADMIN_ADDR"
)

// run runs the command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return runIO(args, stdin, stdout, stderr, getenv, http.DefaultClient)
}

// runWith is runIO with an empty stdin.
func runWith(args []string, stdout, stderr io.Writer, getenv func(string) string, hc *http.Client) int {
	return runIO(args, strings.NewReader(""), stdout, stderr, getenv, hc)
}

func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, hc *http.Client) int {
	root, c := newRoot(stdout, getenv, hc)
	c.stdin, c.stderr = stdin, stderr
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		fmt.Fprintf(stderr, "seckillctl: %v\n", ae)
		return 1
	case errors.Is(err, errUsage) || !c.running:
		// !running: cobra refused the command line before a command ran
		// (unknown command or flag, wrong arguments, a required flag).
		fmt.Fprintf(stderr, "seckillctl: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "seckillctl: %v\n", err)
	return 1
}

// cli holds the global flags.
type cli struct {
	out       io.Writer
	stdin     io.Reader
	stderr    io.Writer
	getenv    func(string) string
	hc        *http.Client
	addr      string
	token     string
	tokenFile string
	output    string
	key       string
	timeout   time.Duration
	running   bool               // a command's RunE started
	after     func([]byte) error // run after a table answer (ban: its end)
}

func newRoot(out io.Writer, getenv func(string) string, hc *http.Client) (*cobra.Command, *cli) {
	c := &cli{out: out, getenv: getenv, hc: hc}
	root := &cobra.Command{
		Use:           "seckillctl",
		Short:         "Operate a live flash sale through the admin API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&c.addr, "addr", "", "admin API base URL: the url the service logs (\"admin API listening url=…\"), e.g. http://127.0.0.1:9090/admin/; with or without /admin/; plain http only to loopback (default $"+envAddr+")")
	pf.StringVar(&c.tokenFile, "token-file", "", "read the bearer token from this file (- for stdin) (default $"+envToken+")")
	pf.StringVar(&c.token, "token", "", "DEPRECATED, insecure: the bearer token on argv, visible to other users (ps); use $"+envToken+" or --token-file")
	pf.StringVarP(&c.output, "output", "o", "table", "output: table or json")
	pf.DurationVar(&c.timeout, "timeout", 30*time.Second, "request timeout")

	act := func(cmd *cobra.Command) *cobra.Command {
		cmd.Flags().StringVar(&c.key, "idempotency-key", "", "Idempotency-Key: a repeat with the same key answers the first answer without acting again")
		return cmd
	}

	root.AddCommand(
		c.loadCmd(act),
		c.readCmd("stats ACTIVITY[/SIZE]", "Show an activity's (or one size's) Redis and database counters", 1, func(a []string) (string, url.Values) {
			return activityPath(a[0]) + "/stats", nil
		}),
		c.readCmd("reservations ACTIVITY USER", "List a buyer's reservations", 2, func(a []string) (string, url.Values) {
			return "activities/" + url.PathEscape(a[0]) + "/reservations", url.Values{"user": {a[1]}}
		}),
		c.readCmd("story ACTIVITY RESERVATION", "Show a reservation across ledger, outbox, result and database", 2, func(a []string) (string, url.Values) {
			return "activities/" + url.PathEscape(a[0]) + "/reservations/" + url.PathEscape(a[1]), nil
		}),
		act(c.actionCmd("pause ACTIVITY[/SIZE]", "Stop new reservations of an activity or one size (buyers are told the sale is paused)", 1, func(a []string) (string, any, error) {
			return activityPath(a[0]) + "/pause", struct{}{}, nil
		})),
		act(c.actionCmd("resume ACTIVITY[/SIZE]", "Resume a paused activity or size", 1, func(a []string) (string, any, error) {
			return activityPath(a[0]) + "/resume", struct{}{}, nil
		})),
		act(c.actionCmd("topup ACTIVITY[/SIZE] N", "Add N units to an activity or one size", 2, c.units("topup"))),
		act(c.actionCmd("withdraw ACTIVITY[/SIZE] N", "Take N unsold units of an activity or one size off sale", 2, c.units("withdraw"))),
		act(c.refundCmd()),
		act(c.reconcileCmd()),
		c.outboxCmd(act),
		act(c.banCmd()),
		act(c.actionCmd("unban KIND ID", "Lift a ban (KIND: user, ip or device)", 2, func(a []string) (string, any, error) {
			return "unban", map[string]string{"kind": a[0], "id": a[1]}, nil
		})),
		c.bansCmd(),
		c.auditCmd(),
		c.queueCmd(act),
	)
	return root, c
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return fmt.Errorf("%w (usage: %s)", err, cmd.UseLine())
		}
		return nil
	}
}

// client returns the API client for the global flags.
func (c *cli) client() (*client, error) {
	if c.output != "table" && c.output != "json" {
		return nil, fmt.Errorf("%w: -o %q: want table or json", errUsage, c.output)
	}
	addr := c.addr
	if addr == "" {
		addr = c.getenv(envAddr)
	}
	if addr == "" {
		return nil, fmt.Errorf("%w: no admin API address: pass --addr or set %s to the url the service logs at startup (\"admin API listening url=http://127.0.0.1:PORT/admin/\"): the service's -admin-addr, never its public address", errUsage, envAddr)
	}
	token, err := c.readToken()
	if err != nil {
		return nil, err
	}
	cl, err := newClient(addr, token, c.hc)
	if err != nil {
		return nil, err
	}
	cl.key = c.key
	return cl, nil
}

// readToken returns the token of --token-file, --token (with a warning) or
// the environment, in that order.
func (c *cli) readToken() (string, error) {
	switch {
	case c.tokenFile != "" && c.token != "":
		return "", fmt.Errorf("%w: --token-file and --token: pass one", errUsage)
	case c.tokenFile != "":
		var b []byte
		var err error
		if c.tokenFile == "-" {
			b, err = io.ReadAll(io.LimitReader(c.stdin, 4096))
		} else {
			b, err = os.ReadFile(c.tokenFile)
		}
		if err != nil {
			return "", fmt.Errorf("%w: --token-file: %v", errUsage, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("%w: --token-file %s: empty", errUsage, c.tokenFile)
		}
		return tok, nil
	case c.token != "":
		fmt.Fprintf(c.stderr, "seckillctl: warning: --token puts the token on the command line, where other users of this machine can read it (ps); use %s or --token-file\n", envToken)
		return c.token, nil
	}
	return c.getenv(envToken), nil
}

func (c *cli) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), c.timeout)
}

// print writes an answer as JSON or as a table (then c.after, if set).
func (c *cli) print(data []byte) error {
	if c.output == "json" {
		_, err := c.out.Write(data)
		return err
	}
	if err := renderTable(c.out, data); err != nil {
		return err
	}
	if c.after != nil {
		return c.after(data)
	}
	return nil
}

func (c *cli) readCmd(use, short string, n int, target func([]string) (string, url.Values)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: exactArgs(n),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.running = true
			cl, err := c.client()
			if err != nil {
				return err
			}
			ctx, cancel := c.ctx(cmd)
			defer cancel()
			path, q := target(args)
			data, err := cl.get(ctx, path, q)
			if err != nil {
				return err
			}
			return c.print(data)
		},
	}
}

func (c *cli) actionCmd(use, short string, n int, body func([]string) (string, any, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: exactArgs(n),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.running = true
			path, b, err := body(args)
			if err != nil {
				return err
			}
			cl, err := c.client()
			if err != nil {
				return err
			}
			ctx, cancel := c.ctx(cmd)
			defer cancel()
			data, err := cl.post(ctx, path, b)
			if err != nil {
				return err
			}
			return c.print(data)
		},
	}
}

func (c *cli) units(action string) func([]string) (string, any, error) {
	return func(a []string) (string, any, error) {
		n, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil || n <= 0 {
			return "", nil, fmt.Errorf("%w: N %q: want a positive integer", errUsage, a[1])
		}
		return activityPath(a[0]) + "/" + action, map[string]int64{"n": n}, nil
	}
}

// activityPath is the admin API path of an activity, or of one size of a
// sale in sizes written "ACTIVITY/SIZE": activities/A/variants/S.
func activityPath(a string) string {
	if act, size, ok := strings.Cut(a, "/"); ok {
		return "activities/" + url.PathEscape(act) + "/variants/" + url.PathEscape(size)
	}
	return "activities/" + url.PathEscape(a)
}

func (c *cli) loadCmd(act func(*cobra.Command) *cobra.Command) *cobra.Command {
	var stock, limit int64
	var start, end, variants string
	cmd := c.actionCmd("load ACTIVITY --stock N", "Load (or reload) an activity", 1, func(a []string) (string, any, error) {
		body := map[string]any{"stock": stock, "per_user_limit": limit}
		if variants != "" {
			vs, sum, err := parseVariants(variants)
			if err != nil {
				return "", nil, err
			}
			if stock < 0 {
				body["stock"] = sum // the variants' sum
			}
			body["variants"] = vs
		} else if stock < 0 {
			return "", nil, fmt.Errorf("%w: --stock N is required (or --variants)", errUsage)
		}
		for name, v := range map[string]string{"start": start, "end": end} {
			if v == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return "", nil, fmt.Errorf("%w: --%s %q: want RFC 3339, e.g. 2030-01-02T15:04:05Z", errUsage, name, v)
			}
			body[name] = t
		}
		return "activities/" + url.PathEscape(a[0]) + "/load", body, nil
	})
	cmd.Flags().Int64Var(&stock, "stock", -1, "units on sale (required, unless --variants: their sum)")
	cmd.Flags().StringVar(&variants, "variants", "", "sell the activity in variants (sizes, colours): ID=STOCK[:LIMIT], comma separated, e.g. 36=50,37=120:1 (LIMIT: units of that variant per buyer, default --limit)")
	cmd.Flags().Int64Var(&limit, "limit", 1, "units one buyer may hold")
	cmd.Flags().StringVar(&start, "start", "", "sale start, RFC 3339 (default: open when loaded)")
	cmd.Flags().StringVar(&end, "end", "", "sale end, RFC 3339 (default: no end)")
	return act(cmd)
}

func (c *cli) reconcileCmd() *cobra.Command {
	var apply bool
	var id, plan string
	cmd := c.actionCmd("reconcile ACTIVITY [--apply --dry-run-id ID [--plan DIGEST]]",
		"Compare the Redis ledger with the database; without --apply a dry run that prints the ID (and plan digest) to apply it with", 1,
		func(a []string) (string, any, error) {
			if !apply && (id != "" || plan != "") {
				return "", nil, fmt.Errorf("%w: --dry-run-id and --plan go with --apply", errUsage)
			}
			if apply && id == "" {
				return "", nil, fmt.Errorf("%w: --apply needs --dry-run-id (run the dry run first)", errUsage)
			}
			body := map[string]any{"apply": apply}
			if id != "" {
				body["dry_run_id"] = id
			}
			if plan != "" {
				body["plan"] = plan
			}
			return "activities/" + url.PathEscape(a[0]) + "/reconcile", body, nil
		})
	cmd.Long = "Compare the Redis ledger with the database. Without --apply: a dry run; it lists the reservations it would release " +
		"(report.release: its plan) and prints dry_run_id and plan. With --apply --dry-run-id ID: release the reservations of that " +
		"plan that are still due, and no other (one that became due since waits for the next dry run); report.skipped lists the " +
		"planned ones no longer due, report.failed those whose release failed. --plan DIGEST makes the server refuse (409 plan_changed) " +
		"an ID whose plan is not the one you read."
	cmd.Flags().BoolVar(&apply, "apply", false, "release what the dry run listed and is still due (needs --dry-run-id)")
	cmd.Flags().StringVar(&id, "dry-run-id", "", "the dry_run_id a dry run of this activity printed")
	cmd.Flags().StringVar(&plan, "plan", "", "the plan digest that dry run printed (optional check)")
	return cmd
}

func (c *cli) outboxCmd(act func(*cobra.Command) *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use: "outbox", Short: "Outbox backlog and retry of FAILED rows",
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: outbox needs a subcommand: stats or retry", errUsage)
		},
	}
	cmd.AddCommand(
		c.readCmd("stats", "Count undelivered outbox rows", 0, func([]string) (string, url.Values) { return "outbox/stats", nil }),
		act(&cobra.Command{
			Use: "retry ID...", Short: "Put FAILED outbox rows back to PENDING",
			Args: func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return fmt.Errorf("retry needs at least one outbox row ID (usage: %s)", cmd.UseLine())
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				c.running = true
				ids := make([]int64, len(args))
				for i, a := range args {
					v, err := strconv.ParseInt(a, 10, 64)
					if err != nil || v <= 0 {
						return fmt.Errorf("%w: outbox row ID %q: want a positive integer", errUsage, a)
					}
					ids[i] = v
				}
				return c.actionCmd("", "", 0, func([]string) (string, any, error) {
					return "outbox/retry", map[string][]int64{"ids": ids}, nil
				}).RunE(cmd, nil)
			},
		}),
	)
	return cmd
}

// banDefault is the length of a ban without --duration, as the reference
// service configures it (risk.Blacklist's default escalation,
// risk.BlacklistConfig: BanBase, BanMax, BanFactor and OffenceMemory).
const banDefault = "the server's escalation: in the reference service 1m for a first offence within 7 days, " +
	"doubling with each further one (2m, 4m, 8m, …) up to 24h; offences include automatic bans, and a longer active ban is kept"

func (c *cli) banCmd() *cobra.Command {
	var reason, duration string
	cmd := c.actionCmd("ban KIND ID --reason R", "Ban a user, IP or device (KIND: user, ip or device; an ip may be a network in CIDR, e.g. 2001:db8:1:2::/64) and print when the ban ends", 2, func(a []string) (string, any, error) {
		body := map[string]string{"kind": a[0], "id": a[1], "reason": reason}
		if duration != "" {
			body["duration"] = duration
		}
		return "ban", body, nil
	})
	cmd.Long = "Ban a user, IP or device (KIND: user, ip or device). Without --duration the ban lasts " + banDefault +
		". The table ends with the line \"ban ends <RFC 3339 time>\" (or \"ban ends never (permanent)\")."
	cmd.Flags().StringVar(&reason, "reason", "", "reason code (required)")
	cmd.Flags().StringVar(&duration, "duration", "", "ban length, e.g. 90m or 24h (default: "+banDefault+")")
	_ = cmd.MarkFlagRequired("reason")
	print := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c.after = c.printBanEnd
		return print(cmd, args)
	}
	return cmd
}

// printBanEnd follows a ban's table with the line "ban ends …".
func (c *cli) printBanEnd(data []byte) error {
	var a struct {
		After *struct {
			Until     time.Time `json:"until"`
			Permanent bool      `json:"permanent"`
		} `json:"after"`
	}
	if json.Unmarshal(data, &a) != nil || a.After == nil {
		return nil
	}
	if a.After.Permanent || a.After.Until.IsZero() {
		_, err := fmt.Fprintln(c.out, "ban ends never (permanent)")
		return err
	}
	_, err := fmt.Fprintf(c.out, "ban ends %s\n", a.After.Until.UTC().Format(time.RFC3339))
	return err
}

func (c *cli) bansCmd() *cobra.Command {
	var kind, after string
	var limit int
	cmd := c.readCmd("bans", "List active bans, a page at a time (by kind and ID)", 0, func([]string) (string, url.Values) {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if kind != "" {
			q.Set("kind", kind)
		}
		if after != "" {
			q.Set("after", after)
		}
		return "bans", q
	})
	cmd.Long = "List active bans: users, then IPs, then devices, each by ID (or one kind with --kind). " +
		"When the answer has a \"next\" line, more follow: pass it as --after for the next page (a page may be short, even empty, before the end)."
	cmd.Flags().StringVar(&kind, "kind", "", "only bans of this kind: user, ip or device")
	cmd.Flags().StringVar(&after, "after", "", "the next cursor of the previous page")
	cmd.Flags().IntVar(&limit, "limit", 100, "bans per page (1..1000)")
	return cmd
}

func (c *cli) auditCmd() *cobra.Command {
	var activity string
	var limit int
	var before uint64
	cmd := c.readCmd("audit", "Read the audit log, newest first", 0, func([]string) (string, url.Values) {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if activity != "" {
			q.Set("activity", activity)
		}
		if before > 0 {
			q.Set("before", strconv.FormatUint(before, 10))
		}
		return "audit", q
	})
	cmd.Flags().StringVar(&activity, "activity", "", "only entries of this activity")
	cmd.Flags().IntVar(&limit, "limit", 50, "entries per page (1..500)")
	cmd.Flags().Uint64Var(&before, "before", 0, "entries older than this ID (the previous page's next)")
	return cmd
}

// variantBody is one variant of a load's body.
type variantBody struct {
	ID           string `json:"id"`
	Stock        int64  `json:"stock"`
	PerUserLimit int64  `json:"per_user_limit,omitempty"`
}

// parseVariants reads --variants (ID=STOCK[:LIMIT],...) and sums the
// stock; the server checks the IDs and the rest.
func parseVariants(s string) ([]variantBody, int64, error) {
	var out []variantBody
	var sum int64
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, rest, ok := strings.Cut(p, "=")
		units, lim, hasLim := strings.Cut(rest, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(units), 10, 64)
		if !ok || strings.TrimSpace(id) == "" || err != nil || n < 0 {
			return nil, 0, fmt.Errorf("%w: --variants %q: want ID=STOCK[:LIMIT] with STOCK >= 0", errUsage, p)
		}
		v := variantBody{ID: strings.TrimSpace(id), Stock: n}
		if hasLim {
			if v.PerUserLimit, err = strconv.ParseInt(strings.TrimSpace(lim), 10, 64); err != nil || v.PerUserLimit < 1 {
				return nil, 0, fmt.Errorf("%w: --variants %q: LIMIT must be a positive integer", errUsage, p)
			}
		}
		out = append(out, v)
		sum += n
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("%w: --variants: none given (want ID=STOCK[:LIMIT],...)", errUsage)
	}
	return out, sum, nil
}
