package inventory

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// SeatState is one seat of a seat map. Bookings above one is a double booking.
type SeatState struct {
	Seat     string `json:"seat"`
	Row      string `json:"row"`
	Number   int    `json:"number"`
	Taken    bool   `json:"taken"`
	User     string `json:"user,omitempty"`
	Bookings int    `json:"bookings"`
}

// SeatMap is an event's seats and who holds them.
type SeatMap struct {
	Event string      `json:"event"`
	Name  string      `json:"name"`
	Seats []SeatState `json:"seats"`
}

// SeatMap returns the event's seats in row order, each with its first booking.
func (s *Service) SeatMap(ctx context.Context, event string) (SeatMap, error) {
	db := s.db.WithContext(ctx)
	var ev Event
	if err := db.Where("id = ?", event).Take(&ev).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return SeatMap{}, fmt.Errorf("%w %q", ErrUnknownEvent, event)
		}
		return SeatMap{}, fmt.Errorf("read event: %w", err)
	}
	var seats []Seat
	if err := db.Where("event_id = ?", event).Find(&seats).Error; err != nil {
		return SeatMap{}, fmt.Errorf("read seats: %w", err)
	}
	var bookings []Booking
	if err := db.Where("event_id = ?", event).Order("id").Find(&bookings).Error; err != nil {
		return SeatMap{}, fmt.Errorf("read bookings: %w", err)
	}
	byLabel := make(map[string]*SeatState, len(seats))
	m := SeatMap{Event: ev.ID, Name: ev.Name, Seats: make([]SeatState, len(seats))}
	sortSeats(seats)
	for i, st := range seats {
		m.Seats[i] = SeatState{Seat: st.Label, Row: st.Row, Number: st.Number}
		byLabel[st.Label] = &m.Seats[i]
	}
	for _, b := range bookings {
		st := byLabel[b.Seat]
		if st == nil {
			continue
		}
		if !st.Taken {
			st.Taken, st.User = true, b.User
		}
		st.Bookings++
	}
	return m, nil
}

// sortSeats orders seats by row (A … Z, AA …) and number.
func sortSeats(seats []Seat) {
	less := func(a, b Seat) bool {
		if len(a.Row) != len(b.Row) {
			return len(a.Row) < len(b.Row)
		}
		if a.Row != b.Row {
			return a.Row < b.Row
		}
		return a.Number < b.Number
	}
	for i := 1; i < len(seats); i++ {
		for j := i; j > 0 && less(seats[j], seats[j-1]); j-- {
			seats[j], seats[j-1] = seats[j-1], seats[j]
		}
	}
}
