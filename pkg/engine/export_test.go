package engine

// Names that the external tests (package engine_test) use and importing
// programs do not.
var ChunkMessageID = chunkMessageID

const (
	AttrFirst = attrFirst
	AttrLast  = attrLast
)
