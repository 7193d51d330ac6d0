CREATE TABLE "pool"."pool_instances" (
	"id" text PRIMARY KEY NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"alive_until" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "pool"."lease_waiters" ADD COLUMN "instance_id" text;--> statement-breakpoint
ALTER TABLE "pool"."lease_waiters" ADD CONSTRAINT "lease_waiters_instance_id_pool_instances_id_fk" FOREIGN KEY ("instance_id") REFERENCES "pool"."pool_instances"("id") ON DELETE cascade ON UPDATE no action;