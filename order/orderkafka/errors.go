package orderkafka

import "errors"

// ErrInvalidConfig is wrapped by every error for bad configuration: a nil
// collaborator or an empty topic given to [NewProducer],
// [NewDeadLetterTopic] or [NewHandler], a negative [WithLinger], or a nil
// admin or client, an empty group or topic given to [ObserveLag]. The
// errors of the processing core are the order package's.
var ErrInvalidConfig = errors.New("orderkafka: invalid configuration")
