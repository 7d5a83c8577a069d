package stack

import (
	"encoding/json"
	"fmt"
)

// fromSettings decodes a SettingsAnnotation: the settings of one resource as it was given,
// which import turns back into configuration. The annotation is outside input (anyone who may
// edit the object may edit it): it must decode and name the object.
func fromSettings[T interface{ ident() (string, string) }](s string) (T, error) {
	var v T
	if s == "" {
		return v, fmt.Errorf("no settings")
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return v, fmt.Errorf("decode settings: %w", err)
	}
	if name, ns := v.ident(); name == "" || ns == "" {
		return v, fmt.Errorf("the settings name no object (name and namespace missing)")
	}
	return v, nil
}

func (j TrainingJob) ident() (string, string) { return j.Name, j.Namespace }

func (c Cube) ident() (string, string) { return c.Name, c.Namespace }

func (s Serving) ident() (string, string) { return s.Name, s.Namespace }
