//! Step times at any size on timing-only devices.
