package risk

import (
	"context"
	"fmt"
)

// DeviceBinder binds a device ID to the first user who presents it (SET NX
// semantics with a TTL, in one Lua call) and refuses the device to every
// other user while the binding lives: one phone or browser profile cannot
// buy for a farm of accounts. A conflict is denied or challenged
// ([WithDeviceConflict]).
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

// NewDeviceBinder returns a DeviceBinder. Options (each a
// [DeviceBinderOption]): [WithKeyPrefix], [WithBindTTL],
// [WithDeviceConflict], [WithRefreshBinding]; a nil option is ignored. A
// nil client or an invalid option fails with [ErrInvalidArgument].
func NewDeviceBinder(rdb Client, opts ...DeviceBinderOption) (*DeviceBinder, error) {
	if rdb == nil {
		return nil, fmt.Errorf("risk: nil redis client: %w", ErrInvalidArgument)
	}
	o, err := buildOptions(opts, DeviceBinderOption.applyDeviceBinder)
	if err != nil {
		return nil, err
	}
	return &DeviceBinder{rdb: rdb, o: o}, nil
}

// Name returns "device".
func (d *DeviceBinder) Name() string { return "device" }

// Bind binds device to user if it is free, and reports its owner. A
// device ID that is not [ValidDeviceID] or a user ID that is not
// [ValidUserID] fails with [ErrInvalidID] and writes nothing.
func (d *DeviceBinder) Bind(ctx context.Context, device, user string) (Binding, error) {
	if err := checkDeviceID(device); err != nil {
		return Binding{}, err
	}
	if err := checkUserID(user); err != nil {
		return Binding{}, err
	}
	refresh := "0"
	if d.o.refreshBinding {
		refresh = "1"
	}
	res, err := deviceBindScript.Run(ctx, d.rdb, []string{deviceKey(d.o.prefix, device)},
		user, d.o.bindTTL.Milliseconds(), refresh).Slice()
	if err != nil {
		return Binding{}, fmt.Errorf("risk: device bind %s: %w", device, err)
	}
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
// device ID fails with [ErrInvalidID].
func (d *DeviceBinder) Unbind(ctx context.Context, device string) error {
	if err := checkDeviceID(device); err != nil {
		return err
	}
	if err := d.rdb.Del(ctx, deviceKey(d.o.prefix, device)).Err(); err != nil {
		return fmt.Errorf("risk: device unbind %s: %w", device, err)
	}
	return nil
}

// Check binds s.DeviceID to s.UserID (skipped unless both are set) and
// denies or challenges (reason [ReasonDeviceShared]) when the device
// belongs to another user. An invalid device or user ID is denied
// ([ReasonInvalidDevice], [ReasonInvalidUser]) and nothing is written.
func (d *DeviceBinder) Check(ctx context.Context, s Subject) (Decision, error) {
	if s.DeviceID == "" || s.UserID == "" {
		return Decision{}, nil
	}
	if dec, bad := invalidSubject(s, true, true); bad {
		return dec, nil
	}
	b, err := d.Bind(ctx, s.DeviceID, s.UserID)
	if err != nil {
		return Decision{}, err
	}
	if b.Conflict {
		return Decision{Action: d.o.deviceConflict, Reason: ReasonDeviceShared}, nil
	}
	return Decision{}, nil
}
