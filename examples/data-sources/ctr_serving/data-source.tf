# A client's workspace finds the prediction endpoint, and the model version it answers with.
data "ctr_serving" "ads" {
  namespace = "ctr-prod"
  name      = "ctr-serving"
}

output "serving" {
  value = {
    url      = data.ctr_serving.ads.url
    model_id = data.ctr_serving.ads.model_id
  }
}
