package engine

import (
	"cmp"
	"slices"
)

// Stats counts what a run or task did.
type Stats struct {
	Objects       int   `json:"objects"`
	Chunks        int   `json:"chunks"`
	BytesPlanned  int64 `json:"bytesPlanned"`
	TasksQueued   int   `json:"tasksQueued"`
	RecordsRead   int64 `json:"recordsRead"`
	RecordsSent   int64 `json:"recordsSent"`
	RecordsFailed int64 `json:"recordsFailed"`
	Messages      int64 `json:"messages"`
	Requests      int64 `json:"requests"`
	Retries       int64 `json:"retries"`
	BytesSent     int64 `json:"bytesSent"`
	// PeakInFlight is the most requests to the target in flight at once,
	// as the sender sized them (see sqsbatch.Options.MaxInFlight).
	PeakInFlight int `json:"peakInFlight,omitempty"`
	// Throttled counts the requests and entries SQS answered with
	// throttling or a server error, which the sender retried and slowed
	// down for.
	Throttled int64 `json:"throttled,omitempty"`
	// TasksSkipped counts tasks that, by the claims store, another
	// delivery had done.
	TasksSkipped int `json:"tasksSkipped,omitempty"`
	// ObjectsMissing counts objects a listing or manifest named that S3
	// did not find when they were planned; they are skipped, with a
	// warning that names each.
	ObjectsMissing int `json:"objectsMissing,omitempty"`
	// ObjectsArchived counts objects the listing found in an archive
	// (GLACIER, DEEP_ARCHIVE, an archive tier of INTELLIGENT_TIERING) with
	// no restored copy, and BytesArchived their size: they are not read,
	// nor counted in Objects and BytesPlanned. Restore them and run again.
	ObjectsArchived int   `json:"objectsArchived,omitempty"`
	BytesArchived   int64 `json:"bytesArchived,omitempty"`
	// ObjectsFiltered counts the objects (with dataset.Source.Versions,
	// the versions) that the source's filters left out, BytesFiltered
	// their size where the listing gave it, and FilteredBy the objects by
	// the name of the filter that left them out (see dataset.Filter.Key):
	// they are not read, nor counted in Objects and BytesPlanned.
	ObjectsFiltered int            `json:"objectsFiltered,omitempty"`
	BytesFiltered   int64          `json:"bytesFiltered,omitempty"`
	FilteredBy      map[string]int `json:"filteredBy,omitempty"`
	// ObjectsFailed counts the chunks of objects that could not be read
	// to their end for a reason no retry fixes (corrupt or truncated data,
	// an object changed since it was planned): what was read was sent, and
	// the rest of each is on the failure output as one failed record.
	ObjectsFailed int `json:"objectsFailed,omitempty"`
	// RecordsOffloaded counts the records sent as pointers to S3 (one
	// PutObject each), among RecordsSent.
	RecordsOffloaded int64 `json:"recordsOffloaded,omitempty"`
	// RecordsCutOff counts the records read that were neither sent nor
	// failed: their send stopped (the run was interrupted, or ran out of
	// time) or an entry of their FIFO group failed. They are on no failure
	// output; the task's next attempt sends them, where it resumes.
	RecordsCutOff int64 `json:"recordsCutOff,omitempty"`
	// TasksHeld counts the tasks put back on the work queue to come back
	// later, their run paused or their target's backlog above
	// TargetMaxBacklog; TasksCancelled those of a cancelled run, parked
	// until it is resumed (or, without a work queue, ended).
	TasksHeld      int `json:"tasksHeld,omitempty"`
	TasksCancelled int `json:"tasksCancelled,omitempty"`
	// StopReason says why the run stopped itself: its failure budget was
	// spent (see Options.Control.MaxFailures).
	StopReason string `json:"stopReason,omitempty"`
	// RecordsMapped counts the records read whose body was their
	// Mapping.BodyField, and FieldsLeftOut names the fields such records
	// had that no part of the mapping took, and so are in no message
	// (the first maxFieldsLeftOut names, sorted).
	RecordsMapped int64    `json:"recordsMapped,omitempty"`
	FieldsLeftOut []string `json:"fieldsLeftOut,omitempty"`
}

// maxFieldsLeftOut bounds the names Stats.FieldsLeftOut keeps.
const maxFieldsLeftOut = 16

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Objects += o.Objects
	s.Chunks += o.Chunks
	s.BytesPlanned += o.BytesPlanned
	s.TasksQueued += o.TasksQueued
	s.RecordsRead += o.RecordsRead
	s.RecordsSent += o.RecordsSent
	s.RecordsFailed += o.RecordsFailed
	s.Messages += o.Messages
	s.Requests += o.Requests
	s.Retries += o.Retries
	s.BytesSent += o.BytesSent
	s.PeakInFlight = max(s.PeakInFlight, o.PeakInFlight)
	s.Throttled += o.Throttled
	s.TasksSkipped += o.TasksSkipped
	s.ObjectsMissing += o.ObjectsMissing
	s.ObjectsArchived += o.ObjectsArchived
	s.BytesArchived += o.BytesArchived
	s.ObjectsFiltered += o.ObjectsFiltered
	s.BytesFiltered += o.BytesFiltered
	for by, n := range o.FilteredBy {
		s.filter(by, n)
	}
	s.ObjectsFailed += o.ObjectsFailed
	s.RecordsOffloaded += o.RecordsOffloaded
	s.RecordsCutOff += o.RecordsCutOff
	s.TasksHeld += o.TasksHeld
	s.TasksCancelled += o.TasksCancelled
	s.StopReason = cmp.Or(s.StopReason, o.StopReason)
	s.RecordsMapped += o.RecordsMapped
	for _, f := range o.FieldsLeftOut {
		if i, found := slices.BinarySearch(s.FieldsLeftOut, f); !found && len(s.FieldsLeftOut) < maxFieldsLeftOut {
			s.FieldsLeftOut = slices.Insert(s.FieldsLeftOut, i, f)
		}
	}
}

// filter counts n objects that the filter by left out in FilteredBy.
func (s *Stats) filter(by string, n int) {
	if s.FilteredBy == nil {
		s.FilteredBy = map[string]int{}
	}
	s.FilteredBy[by] += n
}
