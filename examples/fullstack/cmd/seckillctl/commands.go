package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// Environment variables read by seckillctl.
const (
	envToken = "SECKILL_ADMIN_TOKEN"
	envAddr  = "SECKILL_ADMIN_ADDR"
)

const defaultAddr = "http://127.0.0.1:8080/admin/"

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return runWith(args, stdout, stderr, getenv, http.DefaultClient)
}

func runWith(args []string, stdout, stderr io.Writer, getenv func(string) string, hc *http.Client) int {
	root, c := newRoot(stdout, getenv, hc)
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
	out     io.Writer
	getenv  func(string) string
	hc      *http.Client
	addr    string
	token   string
	output  string
	key     string
	timeout time.Duration
	running bool // a command's RunE started
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
	pf.StringVar(&c.addr, "addr", "", "admin API base URL, e.g. http://127.0.0.1:8080/admin/ (default $"+envAddr+", else "+defaultAddr+")")
	pf.StringVar(&c.token, "token", "", "bearer token (default $"+envToken+"; prefer the variable: argv is visible to other users)")
	pf.StringVarP(&c.output, "output", "o", "table", "output: table or json")
	pf.DurationVar(&c.timeout, "timeout", 30*time.Second, "request timeout")

	act := func(cmd *cobra.Command) *cobra.Command {
		cmd.Flags().StringVar(&c.key, "idempotency-key", "", "Idempotency-Key: a repeat with the same key answers the first answer without acting again")
		return cmd
	}

	root.AddCommand(
		c.loadCmd(act),
		c.readCmd("stats ACTIVITY", "Show an activity's Redis and database counters", 1, func(a []string) (string, url.Values) {
			return "activities/" + url.PathEscape(a[0]) + "/stats", nil
		}),
		c.readCmd("reservations ACTIVITY USER", "List a buyer's reservations", 2, func(a []string) (string, url.Values) {
			return "activities/" + url.PathEscape(a[0]) + "/reservations", url.Values{"user": {a[1]}}
		}),
		c.readCmd("story ACTIVITY RESERVATION", "Show a reservation across ledger, outbox, result and database", 2, func(a []string) (string, url.Values) {
			return "activities/" + url.PathEscape(a[0]) + "/reservations/" + url.PathEscape(a[1]), nil
		}),
		act(c.actionCmd("pause ACTIVITY", "Stop new reservations (buyers are told the sale is paused)", 1, func(a []string) (string, any, error) {
			return "activities/" + url.PathEscape(a[0]) + "/pause", struct{}{}, nil
		})),
		act(c.actionCmd("resume ACTIVITY", "Resume a paused activity", 1, func(a []string) (string, any, error) {
			return "activities/" + url.PathEscape(a[0]) + "/resume", struct{}{}, nil
		})),
		act(c.actionCmd("topup ACTIVITY N", "Add N units to an activity", 2, c.units("topup"))),
		act(c.actionCmd("withdraw ACTIVITY N", "Take N unsold units off sale", 2, c.units("withdraw"))),
		act(c.reconcileCmd()),
		c.outboxCmd(act),
		act(c.banCmd()),
		act(c.actionCmd("unban KIND ID", "Lift a ban (KIND: user, ip or device)", 2, func(a []string) (string, any, error) {
			return "unban", map[string]string{"kind": a[0], "id": a[1]}, nil
		})),
		c.bansCmd(),
		c.auditCmd(),
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
	addr, token := c.addr, c.token
	if addr == "" {
		addr = c.getenv(envAddr)
	}
	if addr == "" {
		addr = defaultAddr
	}
	if token == "" {
		token = c.getenv(envToken)
	}
	cl, err := newClient(addr, token, c.hc)
	if err != nil {
		return nil, err
	}
	cl.key = c.key
	return cl, nil
}

func (c *cli) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), c.timeout)
}

// print writes an answer as JSON or as a table.
func (c *cli) print(data []byte) error {
	if c.output == "json" {
		_, err := c.out.Write(data)
		return err
	}
	return renderTable(c.out, data)
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
		return "activities/" + url.PathEscape(a[0]) + "/" + action, map[string]int64{"n": n}, nil
	}
}

func (c *cli) loadCmd(act func(*cobra.Command) *cobra.Command) *cobra.Command {
	var stock, limit int64
	var start, end string
	cmd := c.actionCmd("load ACTIVITY --stock N", "Load (or reload) an activity", 1, func(a []string) (string, any, error) {
		body := map[string]any{"stock": stock, "per_user_limit": limit}
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
	cmd.Flags().Int64Var(&stock, "stock", -1, "units on sale (required)")
	_ = cmd.MarkFlagRequired("stock")
	cmd.Flags().Int64Var(&limit, "limit", 1, "units one buyer may hold")
	cmd.Flags().StringVar(&start, "start", "", "sale start, RFC 3339 (default: open when loaded)")
	cmd.Flags().StringVar(&end, "end", "", "sale end, RFC 3339 (default: no end)")
	return act(cmd)
}

func (c *cli) reconcileCmd() *cobra.Command {
	var apply bool
	var id string
	cmd := c.actionCmd("reconcile ACTIVITY [--apply --dry-run-id ID]",
		"Compare the Redis ledger with the database; without --apply a dry run that prints the ID to apply it with", 1,
		func(a []string) (string, any, error) {
			if !apply && id != "" {
				return "", nil, fmt.Errorf("%w: --dry-run-id goes with --apply", errUsage)
			}
			if apply && id == "" {
				return "", nil, fmt.Errorf("%w: --apply needs --dry-run-id (run the dry run first)", errUsage)
			}
			body := map[string]any{"apply": apply}
			if id != "" {
				body["dry_run_id"] = id
			}
			return "activities/" + url.PathEscape(a[0]) + "/reconcile", body, nil
		})
	cmd.Flags().BoolVar(&apply, "apply", false, "release what the dry run found (needs --dry-run-id)")
	cmd.Flags().StringVar(&id, "dry-run-id", "", "the dry_run_id a dry run of this activity printed")
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

func (c *cli) banCmd() *cobra.Command {
	var reason, duration string
	cmd := c.actionCmd("ban KIND ID --reason R", "Ban a user, IP or device (KIND: user, ip or device)", 2, func(a []string) (string, any, error) {
		body := map[string]string{"kind": a[0], "id": a[1], "reason": reason}
		if duration != "" {
			body["duration"] = duration
		}
		return "ban", body, nil
	})
	cmd.Flags().StringVar(&reason, "reason", "", "reason code (required)")
	cmd.Flags().StringVar(&duration, "duration", "", "ban length, e.g. 90m or 24h (default: the server's escalation)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (c *cli) bansCmd() *cobra.Command {
	var kind string
	cmd := c.readCmd("bans", "List active bans", 0, func([]string) (string, url.Values) {
		if kind == "" {
			return "bans", nil
		}
		return "bans", url.Values{"kind": {kind}}
	})
	cmd.Flags().StringVar(&kind, "kind", "", "only bans of this kind: user, ip or device")
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
