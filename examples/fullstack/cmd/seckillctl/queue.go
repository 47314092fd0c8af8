package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seckillkit/seckill/examples/fullstack/internal/admitlog"
	"github.com/seckillkit/seckill/waitroom"
	"github.com/seckillkit/seckill/waitroom/draw"
)

// queueCmd is the fair sale's operator plane (-sale-mode queue or draw):
// the seed's commitment before the sale, its reveal, the figures, pause,
// and verify, which recomputes the published order locally
// (waitroom.VerifyOrder, draw.Verify): it trusts nothing the service
// computed.
func (c *cli) queueCmd(act func(*cobra.Command) *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Fair sale (queue or draw mode): seed, commit, start, stats, pause, resume, verify"}
	var seedFile string
	seedOf := func() ([]byte, error) {
		if seedFile == "" {
			return nil, fmt.Errorf("%w: --seed-file is required", errUsage)
		}
		b, err := os.ReadFile(seedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --seed-file: %v", errUsage, err)
		}
		seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) < 16 {
			return nil, fmt.Errorf("%w: --seed-file %s: want at least 16 bytes in hex", errUsage, seedFile)
		}
		return seed, nil
	}
	path := func(activity, op string) string { return "queue/" + url.PathEscape(activity) + "/" + op }
	seed := &cobra.Command{Use: "seed FILE", Short: "Write a new random seed (hex) to FILE (mode 0600) and print its commitment", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.running = true
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			if err := os.WriteFile(args[0], []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
				return err
			}
			_, err := fmt.Fprintln(c.out, waitroom.Commit(b))
			return err
		}}
	commit := c.actionCmd("commit ACTIVITY --seed-file F", "Commit to the seed before the sale (only its SHA-256 is sent; publish it)", 1, func(a []string) (string, any, error) {
		s, err := seedOf()
		if err != nil {
			return "", nil, err
		}
		return path(a[0], "commit"), map[string]string{"commitment": waitroom.Commit(s)}, nil
	})
	commit.Flags().StringVar(&seedFile, "seed-file", "", "the seed file (queue seed)")
	start := c.actionCmd("start ACTIVITY --seed-file F", "Reveal the seed: the pre-queue is shuffled (or the draw drawn) with it at the start", 1, func(a []string) (string, any, error) {
		s, err := seedOf()
		if err != nil {
			return "", nil, err
		}
		return path(a[0], "start"), map[string]string{"seed": hex.EncodeToString(s)}, nil
	})
	start.Flags().StringVar(&seedFile, "seed-file", "", "the seed file (queue seed)")
	verify := &cobra.Command{Use: "verify ACTIVITY", Short: "Recompute the published order from the seed and the entries and check the admissions (or winners)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.running = true
			cl, err := c.client()
			if err != nil {
				return err
			}
			ctx, cancel := c.ctx(cmd)
			defer cancel()
			data, err := cl.get(ctx, path(args[0], "published"), nil)
			if err != nil {
				return err
			}
			var p published
			if err := json.Unmarshal(data, &p); err != nil {
				return fmt.Errorf("published: %w", err)
			}
			msg, err := p.verify()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.out, msg)
			return err
		}}
	cmd.AddCommand(seed, act(commit), act(start), verify,
		c.readCmd("stats ACTIVITY", "Show the queue (waiting, admitted, active, rate) or the draw", 1, func(a []string) (string, url.Values) {
			return path(a[0], "stats"), nil
		}),
		act(c.actionCmd("pause ACTIVITY", "Pause admission (queue mode)", 1, func(a []string) (string, any, error) {
			return path(a[0], "pause"), struct{}{}, nil
		})),
		act(c.actionCmd("resume ACTIVITY", "Resume admission (queue mode)", 1, func(a []string) (string, any, error) {
			return path(a[0], "resume"), struct{}{}, nil
		})),
	)
	return cmd
}

// published is the service's GET queue/{activity}/published.
type published struct {
	Mode       string     `json:"mode"`
	Commitment string     `json:"commitment"`
	Seed       string     `json:"seed"`
	Entries    []string   `json:"entries"`
	Order      []string   `json:"order"`
	Batches    [][]string `json:"batches"`
	Stock      int        `json:"stock"`
}

// verify recomputes the order and checks the admissions against it:
// queue mode, every user admitted once, the pre-queue's admissions in the
// verified order and before any later entry's; draw mode, the winners are
// the first Stock of the recomputed order.
func (p published) verify() (string, error) {
	if p.Seed == "" {
		return "", fmt.Errorf("the seed is not revealed yet (the sale has not started, or queue start was not run)")
	}
	seed, err := hex.DecodeString(p.Seed)
	if err != nil {
		return "", fmt.Errorf("published seed: %w", err)
	}
	if p.Mode == "draw" {
		n := min(p.Stock, len(p.Order))
		if err := draw.Verify(draw.VerifyParams{Seed: seed, Commitment: p.Commitment, Entries: p.Entries, Stock: p.Stock, Winners: p.Order[:n]}); err != nil {
			return "", err
		}
		return fmt.Sprintf("verified: %d entries, %d winners = the first %d of the shuffle of seed %s…", len(p.Entries), n, n, p.Seed[:8]), nil
	}
	if err := waitroom.VerifyOrder(seed, p.Commitment, p.Entries, p.Order); err != nil {
		return "", err
	}
	seen, skipped, err := admitlog.Check(p.Order, p.Batches)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("verified: pre-queue of %d in the order of seed %s…; %d admitted, each once, in that order (%d skipped as abandoned)",
		len(p.Order), p.Seed[:8], len(seen), skipped), nil
}
