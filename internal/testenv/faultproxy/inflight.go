package faultproxy

// arrive counts a request of n body bytes into flight.
func (p *Proxy) arrive(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight++
	p.inFlightBytes += int64(n)
	p.stats.PeakInFlight = max(p.stats.PeakInFlight, p.inFlight)
	p.stats.PeakBytesInFlight = max(p.stats.PeakBytesInFlight, p.inFlightBytes)
}

// depart counts a request of n body bytes out of flight.
func (p *Proxy) depart(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight--
	p.inFlightBytes -= int64(n)
}

// InFlight returns the requests the Proxy is handling now and the bytes of
// their bodies.
func (p *Proxy) InFlight() (requests int, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight, p.inFlightBytes
}

// ResetPeaks sets Stats.PeakInFlight and PeakBytesInFlight to what is in
// flight now, so that a test can watch the peaks of one phase.
func (p *Proxy) ResetPeaks() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.PeakInFlight = p.inFlight
	p.stats.PeakBytesInFlight = p.inFlightBytes
}
