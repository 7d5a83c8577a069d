package api

// ExportFormats are what `cube export --format` reads (what Paddle saved); the provider's
// ctr_training_job.model_export.format takes these names and renders them as the flag.
var ExportFormats = []string{"lodtensor", "combined", "selectedrows", "ps-table"}
