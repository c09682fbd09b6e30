package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// jsonLines is stderr under -log-format json: the logger's lines, already
// JSON objects, pass as they are, and each of the command's own lines
// (progress, summaries, errors) becomes an object with its text as msg, so
// that a log shipper reads every line of stderr as JSON. It is safe for
// concurrent use, as the progress ticker and the run write at once.
type jsonLines struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	now func() time.Time
}

// Write writes the complete lines of p and keeps a partial one for the
// next Write or Close.
func (j *jsonLines) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = append(j.buf, p...)
	for {
		i := bytes.IndexByte(j.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := j.buf[:i]
		j.buf = j.buf[i+1:]
		if err := j.line(line); err != nil {
			return len(p), err
		}
	}
}

// Close writes what is left of a last line without its newline.
func (j *jsonLines) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.buf) == 0 {
		return nil
	}
	line := j.buf
	j.buf = nil
	return j.line(line)
}

func (j *jsonLines) line(line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	if json.Valid(line) && line[0] == '{' {
		_, err := j.w.Write(append(line, '\n'))
		return err
	}
	out, err := json.Marshal(struct {
		Time  time.Time `json:"time"`
		Level string    `json:"level"`
		Msg   string    `json:"msg"`
	}{j.now(), "INFO", string(line)})
	if err != nil {
		return err
	}
	_, err = j.w.Write(append(out, '\n'))
	return err
}

// stderr returns where the command writes its lines and logs under
// -log-format, whether it may draw a live bar (tty), and what to call when
// it is done: under json, the jsonLines over stderr and no bar.
func (f *cmdFlags) stderr(stderr io.Writer, tty bool) (io.Writer, bool, func()) {
	if f.logFormat != "json" {
		return stderr, tty, func() {}
	}
	j := &jsonLines{w: stderr, now: time.Now}
	return j, false, func() { j.Close() }
}
