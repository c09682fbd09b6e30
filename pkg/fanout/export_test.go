package fanout

// Names that the external tests (package fanout_test) use and importing
// programs do not.
var ChunkMessageID = chunkMessageID

const (
	AttrFirst = attrFirst
	AttrLast  = attrLast
)
