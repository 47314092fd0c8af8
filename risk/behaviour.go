package risk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// Behaviour counts each user's requests in a sliding window kept in Redis
// (one sorted-set log per user, exact, Redis time) and judges them: above
// the flag threshold the user is challenged (or only flagged, see
// [BehaviourConfig.FlagOnly]); above the deny threshold the request is
// denied as throttled (HTTP 429) until the window frees a slot, and, with
// [BehaviourConfig.AutoBlacklist], the user is banned once per crossing.
//
// It is keyed by user only. Keying by IP would punish everyone behind a
// shared NAT; if you want an IP-level counter, build a second Behaviour
// through [NewRule] with a far higher threshold and a Challenge-only
// outcome.
//
// Memory per user is bounded: at most deny+1 events are stored.
// A Behaviour is safe for concurrent use.
type Behaviour struct {
	rdb          Client
	o            options
	window       time.Duration
	flag, deny   int64
	nonceBase    string
	nonceCounter atomic.Uint64
}

// BehaviourResult is the outcome of one [Behaviour.Record].
type BehaviourResult struct {
	// Count is the number of the user's events in the window, this one
	// included, capped at deny+1.
	Count int64
	// Flagged is Count > flag threshold.
	Flagged bool
	// Denied is Count > deny threshold.
	Denied bool
	// Crossed is true for the one call that went over the deny threshold.
	Crossed bool
	// RetryAfter is, when Denied, the time until the window frees a slot.
	RetryAfter time.Duration
	// Ban is set when this call banned the user (or, without [KindUser]
	// in [BehaviourConfig.AutoBlacklistKinds], the first of the kinds it
	// banned; [BehaviourConfig.AutoBlacklist]).
	Ban *Ban
}

// BehaviourConfig holds the settings of [NewBehaviour]. Window, FlagAt and
// DenyAt are required; every other zero field keeps its default.
type BehaviourConfig struct {
	// Window is the sliding window events are counted in; at least 1ms.
	Window time.Duration
	// FlagAt and DenyAt are the thresholds: a user with more than FlagAt
	// events within Window is flagged, one with more than DenyAt denied
	// (0 < FlagAt <= DenyAt; FlagAt == DenyAt disables flagging).
	FlagAt, DenyAt int64
	// KeyPrefix prefixes every Redis key. Default "seckill:".
	KeyPrefix string
	// AutoBlacklist, when set, bans a user through it (escalating, reason
	// [ReasonTooFrequent]) once each time the user crosses DenyAt.
	// Default: no automatic ban.
	AutoBlacklist *Blacklist
	// AutoBlacklistKinds are what of the crossing request's [Subject]
	// AutoBlacklist bans, each escalating on its own: [KindUser] its user,
	// [KindDevice] its device (when it has one), [KindIP] its network:
	// an IPv6 address's /64 (the longest of the blacklist's
	// [BlacklistConfig.IPv6Prefixes]; a client picks any address of its
	// /64), an IPv4 address alone — opt in for IPs only where clients do
	// not share NAT addresses. Default: [KindUser] only. [Behaviour.Record]
	// knows only the user and bans it only.
	AutoBlacklistKinds []Kind
	// FlagOnly makes a flagged user (between the thresholds) pass: the
	// decision is Allow and carries the flag in [Decision.Flags]. Default
	// off: a flagged user is challenged ([Challenge]).
	FlagOnly bool
	// Logger logs a failed automatic ban. Default: discard.
	Logger *slog.Logger
}

// NewBehaviour returns a Behaviour with the settings of cfg. A nil client
// or bad thresholds fail with [ErrInvalidConfig].
func NewBehaviour(rdb Client, cfg BehaviourConfig) (*Behaviour, error) {
	if rdb == nil {
		return nil, fmt.Errorf("risk: nil redis client: %w", ErrInvalidConfig)
	}
	if cfg.Window < time.Millisecond || cfg.FlagAt < 1 || cfg.DenyAt < cfg.FlagAt {
		return nil, fmt.Errorf("risk: behaviour needs Window >= 1ms and 0 < FlagAt <= DenyAt: %w", ErrInvalidConfig)
	}
	o := defaultOptions()
	o.setCommon(cfg.KeyPrefix, nil, cfg.Logger)
	o.autoBlacklist = cfg.AutoBlacklist
	o.autoKinds = []Kind{KindUser}
	if cfg.AutoBlacklistKinds != nil {
		o.autoKinds = nil
		for _, k := range cfg.AutoBlacklistKinds {
			if k != KindUser && k != KindIP && k != KindDevice {
				return nil, fmt.Errorf("risk: unknown kind %.16q in AutoBlacklistKinds: %w", k, ErrInvalidConfig)
			}
			if !slices.Contains(o.autoKinds, k) {
				o.autoKinds = append(o.autoKinds, k)
			}
		}
	}
	if cfg.FlagOnly {
		o.flagAction = Allow
	}
	var nb [6]byte
	_, _ = rand.Read(nb[:])
	return &Behaviour{rdb: rdb, o: o, window: cfg.Window, flag: cfg.FlagAt, deny: cfg.DenyAt,
		nonceBase: hex.EncodeToString(nb[:])}, nil
}

// Name returns "behaviour".
func (b *Behaviour) Name() string { return "behaviour" }

// Record counts one event of user and reports where the user stands. A
// user ID that is not [ValidUserID] fails with [ErrInvalidArgument] and records
// nothing.
func (b *Behaviour) Record(ctx context.Context, user string) (BehaviourResult, error) {
	if err := checkUserID(user); err != nil {
		return BehaviourResult{}, err
	}
	return b.record(ctx, Subject{UserID: user})
}

// record is Record of s.UserID, whose automatic bans cover s.
func (b *Behaviour) record(ctx context.Context, s Subject) (BehaviourResult, error) {
	res, err := behaviourScript.Run(ctx, b.rdb, []string{behaviourKey(b.o.prefix, s.UserID)}, b.args()...).Int64Slice()
	if err != nil {
		return BehaviourResult{}, fmt.Errorf("risk: behaviour %s: %w", s.UserID, err)
	}
	return b.result(ctx, s, res)
}

// args are behaviour.lua's ARGV for one event.
func (b *Behaviour) args() []any {
	return []any{b.window.Milliseconds(), b.deny, b.nonceBase + "." + strconv.FormatUint(b.nonceCounter.Add(1), 36)}
}

// result is Record's answer for behaviour.lua's reply res: the thresholds,
// then the automatic bans of a subject whose user crossed the deny
// threshold.
func (b *Behaviour) result(ctx context.Context, s Subject, res []int64) (BehaviourResult, error) {
	if len(res) != 3 {
		return BehaviourResult{}, fmt.Errorf("risk: behaviour: %w: %v", ErrBadReply, res)
	}
	r := BehaviourResult{Count: res[0], Crossed: res[1] == 1}
	r.Flagged = r.Count > b.flag && b.flag < b.deny
	r.Denied = r.Count > b.deny
	if r.Denied {
		r.RetryAfter = time.Duration(res[2]) * time.Millisecond
	}
	if !r.Crossed || b.o.autoBlacklist == nil {
		return r, nil
	}
	var errs []error
	for _, kind := range b.o.autoKinds {
		var id string
		switch {
		case kind == KindUser:
			id = s.UserID
		case kind == KindDevice && s.DeviceID != "":
			id = s.DeviceID
		case kind == KindIP && s.IP.IsValid():
			id = b.o.autoBlacklist.autoIPID(s.IP)
		default:
			continue
		}
		ban, err := b.o.autoBlacklist.Add(ctx, kind, id, ReasonTooFrequent)
		if err != nil {
			// The count is recorded; the ban failed. Report it: the caller
			// still gets the deny from r.Denied.
			errs = append(errs, fmt.Errorf("risk: behaviour auto-blacklist %s:%s: %w", kind, id, err))
			continue
		}
		if r.Ban == nil {
			r.Ban = &ban
		}
		if ban.Duration > r.RetryAfter {
			r.RetryAfter = ban.Duration
		}
	}
	return r, errors.Join(errs...)
}

// Check records one event of s.UserID (skipped when empty) and decides:
// Deny (throttled, reason [ReasonTooFrequent]) above the deny threshold,
// the flag action (reason [ReasonSuspicious]) above the flag threshold. An
// invalid user ID is denied ([ReasonInvalidUser]) and not recorded.
func (b *Behaviour) Check(ctx context.Context, s Subject) (Decision, error) {
	if s.UserID == "" {
		return Decision{}, nil
	}
	if d, bad := invalidSubject(s, true, false); bad {
		return d, nil
	}
	r, err := b.record(ctx, s)
	return b.decide(ctx, s, r, err)
}

// decide is Check's decision on Record's answer.
func (b *Behaviour) decide(ctx context.Context, s Subject, r BehaviourResult, err error) (Decision, error) {
	if err != nil {
		if !r.Denied {
			return Decision{}, err
		}
		// Only the automatic ban failed: the deny stands.
		b.o.logger.WarnContext(ctx, "risk: auto-blacklist failed", "user", s.UserID, "err", err)
	}
	switch {
	case r.Denied:
		return Decision{Action: Deny, Reason: ReasonTooFrequent, Throttled: true, RetryAfter: r.RetryAfter}, nil
	case r.Flagged && b.o.flagAction == Challenge:
		return Decision{Action: Challenge, Reason: ReasonSuspicious, Flags: []string{ReasonSuspicious}}, nil
	case r.Flagged:
		return Decision{Flags: []string{ReasonSuspicious}}, nil
	}
	return Decision{}, nil
}
