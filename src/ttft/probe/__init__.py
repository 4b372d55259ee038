"""Attribution of a live target."""
