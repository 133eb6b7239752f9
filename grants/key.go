package grants

import "github.com/sandboxd/sandboxd/boundary"

// Key is the boundary the request asks about (boundary.Key): two
// requests with one Key are sightings of the same boundary.
func (r Request) Key() boundary.Key {
	return boundary.Key{Surface: r.Surface, Operation: r.Operation, Path: r.Path, Destination: r.DestinationText()}
}
