// Package orderkafka is the Kafka (IBM/sarama) edge of the order package:
// everything that touches a sarama type lives here, so that order itself
// depends on no Kafka client.
//
//   - [SaramaConfig]: the safe client configuration (acks=all, idempotent
//     producer, one in-flight request, hash partitioner on the user ID;
//     consumer auto-commit of marked offsets only);
//   - [Producer]: publishes over a sarama.SyncProducer (its Publish method
//     is a handoff.Publisher), with the trace headers of [WithHeaders];
//     Publish returns nil only once the broker acknowledged that message.
//     [WithBatching] gathers concurrent Publish calls into one
//     SendMessages call, each caller still answered by its own message's
//     acknowledgement (off by default: sarama already packs concurrent
//     sends into one request per broker, and batching on top measured
//     slower, see BENCHMARKS.md); [WithObserver] reports each produce call;
//     [Producer.Close] sends what is gathered;
//   - [Handler]: the sarama.ConsumerGroupHandler that collects a claim's
//     records in batches, hands them to an order.Consumer (the processing
//     core: decode, one DB transaction per batch, release, dead-letter) and
//     marks the offset of the last record the consumer reports done — only
//     after its transaction committed;
//   - [DeadLetterTopic]: an order.DeadLetter writing poison records to a
//     topic;
//   - [ObserveLag]: the consumer group's lag, as a number and, given an
//     observer, as the gauge order.consumer_lag;
//   - [Positions]: where the broker wrote each message (recorded in Redis
//     from [WithOnAck]), and, once per reconcile pass, which reservations
//     the group will still deliver (at or after its committed offset, not
//     trimmed by retention): the reconciler's PendingPass, so a consumer
//     lagging past the reconcile grace fails no sale.
//
// Options are interfaces, one per constructor ([ProducerOption],
// [HandlerOption]); bad configuration wraps [ErrInvalidConfig].
//
// Wiring:
//
//	cons, _ := order.NewConsumer(proc, releaser, order.WithDeadLetter(dlq))
//	h, _ := orderkafka.NewHandler(cons)
//	group.Consume(ctx, []string{"orders"}, h) // group built with orderkafka.SaramaConfig()
//
// Every exported type is safe for concurrent use.
package orderkafka
