"""The adoption of the app's own collection: report and import against a bare paginated get."""
