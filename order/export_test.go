package order

// WantIndexes exports wantIndexes to the external tests.
var WantIndexes = wantIndexes

// IndexesOf and StripSQLComments export the schema tests' helpers.
var (
	IndexesOf        = indexesOf
	StripSQLComments = stripSQLComments
)
