// Package orderid issues the order IDs of the order package: a snowflake
// [Generator] (41-bit milliseconds since an epoch, 10-bit machine ID,
// 12-bit sequence; never repeats or goes back, even when the clock steps
// back) and a machine-ID [Lease] taken from Redis, so that two running
// instances never share a machine ID and a restarted one starts above the
// last millisecond its predecessor used.
//
//	lease, err := orderid.AcquireMachine(ctx, rdb, orderid.WithKeyPrefix("shop:"))
//	go lease.Run(ctx)          // renews every TTL/3; returns ErrLeaseLost when lost
//	defer lease.Close()        // releases the machine ID
//	ids, err := lease.NewGenerator()
//	proc, err := order.NewProcessor(db, ids) // a *Generator is an order.IDSource
//
// Without Redis, give each instance its machine ID from configuration
// with [New]. [Decompose] splits an ID into its fields.
//
// Options are interfaces, one per constructor ([GeneratorOption],
// [LeaseOption]); bad configuration wraps [ErrInvalidConfig].
// [WithObserver] reports every lease renewal as the stage
// "orderid.lease" (ok, lost, error) to the observer shape every seckill
// package shares.
//
// # Redis keys and scripts
//
//	<prefix>{idgen:<n>}:lease  string: owner token, PX = lease TTL
//	<prefix>{idgen:<n>}:floor  string: the highest millisecond any owner used (no TTL)
//
// lease_acquire.lua takes a free lease (SET NX PX) and returns the floor;
// lease_renew.lua extends (or releases) a lease it owns and raises the
// floor. Both keys of a machine ID share one hash tag (Cluster-safe). The
// scripts read no time: the TTL is Redis's.
//
// Every exported type is safe for concurrent use.
package orderid
