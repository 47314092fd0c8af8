package risk

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// DeviceBinder binds a device ID to the first user who presents it (SET NX
// semantics with a TTL, in one Lua call) and refuses the device to every
// other user while the binding lives: one phone or browser profile cannot
// buy for a farm of accounts. A conflict is denied or challenged
// ([DeviceBinderConfig.ChallengeConflict]), and with
// [DeviceBinderConfig.AutoBlacklist] the device is banned, escalating
// like a user's automatic ban.
//
// A request that carries no device ID cannot go around the binding by
// leaving it out: a subject with a user and no device is challenged by
// default (reason [ReasonDeviceMissing]), denied with
// [DeviceBinderConfig.RequireDevice] (a sale whose clients always send one,
// e.g. an app), or only flagged with [DeviceBinderConfig.FlagMissing] (a
// risk signal in [Decision.Flags] for a caller that scores).
//
// A DeviceBinder is safe for concurrent use; of many simultaneous first
// uses of a device, exactly one user binds it.
type DeviceBinder struct {
	rdb Client
	o   options
}

// Binding is the outcome of [DeviceBinder.Bind].
type Binding struct {
	// Owner is the user the device is bound to.
	Owner string
	// New is true when this call created the binding.
	New bool
	// Conflict is true when the device is bound to another user.
	Conflict bool
}

// DeviceBinderConfig holds the settings of [NewDeviceBinder]; the zero
// value is the default.
type DeviceBinderConfig struct {
	// KeyPrefix prefixes every Redis key. Default "seckill:".
	KeyPrefix string
	// BindTTL is how long a device stays bound to its first user. Default
	// 30 days; at least 1ms.
	BindTTL time.Duration
	// ChallengeConflict makes a device bound to one user and presented by
	// another a [Challenge]. Default off: it is a [Deny].
	ChallengeConflict bool
	// FixedExpiry keeps a binding's expiry where its creation put it.
	// Default off: each use by the owner pushes it to now + BindTTL.
	FixedExpiry bool
	// RequireDevice denies a subject that has a user but no device ID
	// (reason [ReasonDeviceMissing]). Default off: it is challenged, with
	// the same reason.
	RequireDevice bool
	// FlagMissing lets a subject without a device ID pass, with
	// [ReasonDeviceMissing] in [Decision.Flags] (a signal to score, not a
	// gate). Default off (challenged). Setting it with RequireDevice fails
	// with [ErrInvalidConfig].
	FlagMissing bool
	// AutoBlacklist, when set, bans the device through it ([KindDevice],
	// escalating as [Blacklist.Add], reason [ReasonDeviceShared]) each
	// time a user other than its owner presents it: a device that keeps
	// changing hands is refused to everyone, its owner too, for longer
	// each time. Default: no automatic ban.
	AutoBlacklist *Blacklist
	// Logger logs a failed automatic ban. Default: discard.
	Logger *slog.Logger
}

// NewDeviceBinder returns a DeviceBinder with the settings of cfg. A nil
// client or a BindTTL below 1ms (other than 0) fails with
// [ErrInvalidConfig].
func NewDeviceBinder(rdb Client, cfg DeviceBinderConfig) (*DeviceBinder, error) {
	if rdb == nil {
		return nil, fmt.Errorf("risk: nil redis client: %w", ErrInvalidConfig)
	}
	o := defaultOptions()
	o.setCommon(cfg.KeyPrefix, nil, nil)
	o.bindTTL = orDefault(cfg.BindTTL, o.bindTTL)
	if o.bindTTL < time.Millisecond {
		return nil, fmt.Errorf("risk: bind TTL %v must be >= 1ms: %w", cfg.BindTTL, ErrInvalidConfig)
	}
	if cfg.ChallengeConflict {
		o.deviceConflict = Challenge
	}
	switch {
	case cfg.RequireDevice && cfg.FlagMissing:
		return nil, fmt.Errorf("risk: RequireDevice and FlagMissing both set: %w", ErrInvalidConfig)
	case cfg.RequireDevice:
		o.deviceMissing = Deny
	case cfg.FlagMissing:
		o.deviceMissing = Allow
	}
	o.refreshBinding = !cfg.FixedExpiry
	o.autoBlacklist = cfg.AutoBlacklist
	if cfg.Logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	} else {
		o.logger = cfg.Logger
	}
	return &DeviceBinder{rdb: rdb, o: o}, nil
}

// Name returns "device".
func (d *DeviceBinder) Name() string { return "device" }

// Bind binds device to user if it is free, and reports its owner. A
// device ID that is not [ValidDeviceID] or a user ID that is not
// [ValidUserID] fails with [ErrInvalidArgument] and writes nothing.
func (d *DeviceBinder) Bind(ctx context.Context, device, user string) (Binding, error) {
	if err := checkDeviceID(device); err != nil {
		return Binding{}, err
	}
	if err := checkUserID(user); err != nil {
		return Binding{}, err
	}
	res, err := deviceBindScript.Run(ctx, d.rdb, []string{deviceKey(d.o.prefix, device)}, d.args(user)...).Slice()
	if err != nil {
		return Binding{}, fmt.Errorf("risk: device bind %s: %w", device, err)
	}
	return bindReply(res)
}

// args are device_bind.lua's ARGV for user.
func (d *DeviceBinder) args(user string) []any {
	refresh := "0"
	if d.o.refreshBinding {
		refresh = "1"
	}
	return []any{user, d.o.bindTTL.Milliseconds(), refresh}
}

// bindReply is device_bind.lua's reply as Bind returns it.
func bindReply(res []any) (Binding, error) {
	if len(res) != 2 {
		return Binding{}, fmt.Errorf("risk: device bind: %w: %v", ErrBadReply, res)
	}
	status, ok1 := res[0].(int64)
	owner, ok2 := res[1].(string)
	if !ok1 || !ok2 || status < 0 || status > 2 {
		return Binding{}, fmt.Errorf("risk: device bind: %w: %v", ErrBadReply, res)
	}
	return Binding{Owner: owner, New: status == 1, Conflict: status == 0}, nil
}

// Unbind frees the device (e.g. after a support request). An invalid
// device ID fails with [ErrInvalidArgument].
func (d *DeviceBinder) Unbind(ctx context.Context, device string) error {
	if err := checkDeviceID(device); err != nil {
		return err
	}
	if err := d.rdb.Del(ctx, deviceKey(d.o.prefix, device)).Err(); err != nil {
		return fmt.Errorf("risk: device unbind %s: %w", device, err)
	}
	return nil
}

// Check binds s.DeviceID to s.UserID and denies or challenges (reason
// [ReasonDeviceShared]) when the device belongs to another user, banning
// it with [DeviceBinderConfig.AutoBlacklist]. A subject without a user is
// skipped; one with a user and no device is challenged, denied or flagged
// ([ReasonDeviceMissing], see [DeviceBinderConfig.RequireDevice]). An
// invalid device or user ID is denied ([ReasonInvalidDevice],
// [ReasonInvalidUser]) and nothing is written.
func (d *DeviceBinder) Check(ctx context.Context, s Subject) (Decision, error) {
	if dec, done := d.precheck(s); done {
		return dec, nil
	}
	b, err := d.Bind(ctx, s.DeviceID, s.UserID)
	if err != nil {
		return Decision{}, err
	}
	return d.decide(ctx, s, b), nil
}

// precheck is Check's decision before Redis, done when it needs none.
func (d *DeviceBinder) precheck(s Subject) (Decision, bool) {
	switch {
	case s.UserID == "":
		return Decision{}, true
	case s.DeviceID == "":
		if dec, bad := invalidSubject(s, true, false); bad {
			return dec, true
		}
		if d.o.deviceMissing == Allow {
			return Decision{Flags: []string{ReasonDeviceMissing}}, true
		}
		return Decision{Action: d.o.deviceMissing, Reason: ReasonDeviceMissing}, true
	}
	return invalidSubject(s, true, true)
}

// decide is Check's decision on a binding, after the automatic ban of a
// device presented by another user.
func (d *DeviceBinder) decide(ctx context.Context, s Subject, b Binding) Decision {
	if !b.Conflict {
		return Decision{}
	}
	dec := Decision{Action: d.o.deviceConflict, Reason: ReasonDeviceShared}
	if bl := d.o.autoBlacklist; bl != nil {
		ban, err := bl.Add(ctx, KindDevice, s.DeviceID, ReasonDeviceShared)
		if err != nil {
			// The conflict stands; the ban failed.
			d.o.logger.WarnContext(ctx, "risk: device auto-blacklist failed", "device", s.DeviceID, "err", err)
		} else if dec.Action == Deny && ban.Duration > 0 {
			dec.RetryAfter = ban.Duration
		}
	}
	return dec
}
